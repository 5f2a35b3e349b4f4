// The memstack memory browser: plain JavaScript over the public REST API (no build step, no CDN).
//
// Views are hash routes (#/, #/user/<id>, #/user/<id>/memory/<id>, #/user/<id>/search, #/jobs), so
// the back button, bookmarks and a reload all work. The credential lives in sessionStorage only
// (gone when the tab closes). Every text that came from the API is put in the page as text
// (textContent), never as HTML.
"use strict";

const BASE = document.querySelector('meta[name="memstack-base"]').content;
const CREDENTIAL = "memstack.credential";
const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ DOM helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let fieldSeq = 0;
/** A labelled control: the label names it, the hint describes it (screen readers read both). */
function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  const parts = [h("label", { for: id }, label), control];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute("aria-describedby", hintId);
    parts.push(h("span", { class: "hint", id: hintId }, hint));
  }
  const box = h("div", { class: control.type === "checkbox" ? "field check" : "field" }, ...parts);
  if (control.type === "checkbox") box.prepend(control);
  return box;
}

function select(name, options, value) {
  return h(
    "select",
    { name },
    options.map(([v, text]) => h("option", { value: v, selected: v === (value ?? "") }, text)),
  );
}

function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function badges(m) {
  return [
    m.deleted ? h("span", { class: "badge deleted" }, "deleted") : null,
    m.is_current && !m.deleted ? h("span", { class: "badge current" }, "current") : null,
    !m.is_current ? h("span", { class: "badge superseded" }, "superseded") : null,
  ];
}

function table(headers, rows, caption) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", { class: "visually-hidden" }, caption) : null,
      h("thead", {}, h("tr", {}, headers.map(([text, cls]) => h("th", { scope: "col", class: cls }, text)))),
      h("tbody", {}, rows),
    ),
  );
}

const enc = encodeURIComponent;
const userLink = (user) => `#/user/${enc(user)}`;
const memoryLink = (user, id) => `#/user/${enc(user)}/memory/${enc(id)}`;

// --------------------------------------------------------------- messages, loading
function showAlert(error) {
  const box = $("alert");
  box.replaceChildren();
  if (!error) {
    box.hidden = true;
    return;
  }
  if (error instanceof ApiError) {
    box.append(`${error.status} `, h("code", {}, error.code), `: ${error.message}`);
    for (const d of error.details || []) {
      if (d && d.message) box.append(h("div", {}, `${d.field ? d.field + ": " : ""}${d.message}`));
    }
  } else {
    box.append(String(error && error.message ? error.message : error));
  }
  box.hidden = false;
}

let noticeFor = 0; // navigations a notice outlives (it is usually set just before one)
function notice(text) {
  const box = $("notice");
  box.textContent = text || "";
  box.hidden = !text;
  noticeFor = text ? 1 : 0;
}

let inFlight = 0;
let loadingTimer = null;
function loading(delta) {
  inFlight += delta;
  document.body.setAttribute("aria-busy", inFlight > 0 ? "true" : "false");
  if (inFlight > 0 && loadingTimer === null) {
    // Only calls slower than a blink show the indicator (no flicker on fast ones).
    loadingTimer = setTimeout(() => ($("loading").hidden = false), 150);
  } else if (inFlight === 0) {
    clearTimeout(loadingTimer);
    loadingTimer = null;
    $("loading").hidden = true;
  }
}

// ------------------------------------------------------------------------ the API
class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

function credential() {
  try {
    return JSON.parse(sessionStorage.getItem(CREDENTIAL) || "null");
  } catch {
    return null;
  }
}

function authHeaders() {
  const c = credential();
  if (!c) return {};
  // An API key (memstack serve) as a bearer token; a Cognito token exactly as the user pool issued it,
  // with the usage plan's key beside it when the stack requires one (api_key_required).
  if (c.kind !== "cognito") return { Authorization: `Bearer ${c.value}` };
  return c.planKey ? { Authorization: c.value, "X-Api-Key": c.planKey } : { Authorization: c.value };
}

async function api(method, path, { query, body } = {}) {
  const url = new URL(BASE + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = { Accept: "application/json", ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  loading(+1);
  try {
    let response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new ApiError(0, "network_error", `the API could not be reached (${err.message})`, []);
    }
    const text = await response.text();
    let payload = null;
    try {
      payload = text ? JSON.parse(text) : null;
    } catch {
      payload = null;
    }
    if (!response.ok) {
      const e = (payload && payload.error) || {};
      const error = new ApiError(response.status, e.code || "http_error", e.message || text || response.statusText, e.details);
      if (response.status === 401) onUnauthorized(error);
      throw error;
    }
    return payload;
  } finally {
    loading(-1);
  }
}

let schemaEnums = null;
/** The enums (kinds, categories, tiers, scopes) from the API's own OpenAPI document, read once. */
async function enums() {
  if (schemaEnums) return schemaEnums;
  const doc = await api("GET", "/openapi.json");
  const schemas = (doc.components && doc.components.schemas) || {};
  const of = (name) => (schemas[name] && schemas[name].enum) || [];
  schemaEnums = { kind: of("Kind"), category: of("Category"), tier: of("Tier"), scope: of("Scope") };
  return schemaEnums;
}

// --------------------------------------------------------------------- sign in/out
function onUnauthorized() {
  sessionStorage.removeItem(CREDENTIAL);
  updateSession();
}

function updateSession() {
  const c = credential();
  $("who").textContent = c ? (c.kind === "cognito" ? "Signed in (Cognito token)" : "Signed in (API key)") : "";
  $("sign-out").hidden = !c;
}

let pageConfig = null;
/** How this deployment lets the page sign in (/ui/config.json: a Cognito app client, or none), read once. */
async function signInConfig() {
  if (pageConfig) return pageConfig;
  try {
    const response = await fetch(`${BASE}/ui/config.json`, { headers: { Accept: "application/json" } });
    pageConfig = response.ok ? await response.json() : { cognito: null };
  } catch {
    pageConfig = { cognito: null };
  }
  return pageConfig;
}

/** A Cognito user's ID token from the pool's own endpoint (InitiateAuth, USER_PASSWORD_AUTH; no secret). */
async function cognitoToken(cognito, username, password) {
  loading(+1);
  try {
    let response;
    try {
      response = await fetch(cognito.endpoint, {
        method: "POST",
        headers: { "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth" },
        body: JSON.stringify({ AuthFlow: "USER_PASSWORD_AUTH", ClientId: cognito.client_id, AuthParameters: { USERNAME: username, PASSWORD: password } }),
      });
    } catch (err) {
      throw new ApiError(0, "network_error", `Cognito could not be reached (${err.message})`, []);
    }
    const payload = await response.json().catch(() => ({}));
    if (!response.ok) {
      // Cognito's own words: {"__type": "NotAuthorizedException", "message": "Incorrect username or password."}
      const code = String(payload.__type || "cognito_error").split("#").pop();
      throw new ApiError(response.status, code, payload.message || response.statusText, []);
    }
    if (payload.ChallengeName) {
      throw new ApiError(0, payload.ChallengeName, `Cognito asks this user to complete ${payload.ChallengeName} first (for example a new password); do that in your app or with the AWS CLI, then sign in here`, []);
    }
    const token = payload.AuthenticationResult && payload.AuthenticationResult.IdToken;
    if (!token) throw new ApiError(0, "cognito_error", "Cognito answered without an ID token", []);
    return token;
  } finally {
    loading(-1);
  }
}

async function signInView(main, error) {
  const mine = generation;
  const { cognito } = await signInConfig();
  if (mine !== generation) return; // another view was asked for meanwhile
  const kinds = [["key", "API key (memstack serve, or a deployed stack's key)"], ["cognito", "Cognito token (a stack with a Cognito user pool)"]];
  if (cognito) kinds.unshift(["cognito-user", "Cognito user name and password"]);
  const kind = select("kind", kinds, kinds[0][0]);
  const value = h("input", { type: "password", name: "credential", autocomplete: "off", spellcheck: "false" });
  const username = h("input", { name: "username", autocomplete: "username", spellcheck: "false" });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password" });
  const planKey = h("input", { type: "password", name: "plan_key", autocomplete: "off", spellcheck: "false" });
  const valueField = field("Credential", value, "memstack serve: a key of MEMSTACK_API_KEYS (e.g. dev-key); AWS: a Cognito ID token");
  const userFields = [field("User name", username), field("Password", password, "sent only to this pool's Cognito endpoint; never kept")];
  const planField = field("API Gateway key (only if the stack requires one)", planKey);
  const show = () => {
    const user = kind.value === "cognito-user";
    valueField.hidden = user;
    value.required = !user;
    for (const f of userFields) f.hidden = !user;
    username.required = password.required = user;
    planField.hidden = kind.value === "key";
  };
  kind.addEventListener("change", show);
  const form = h(
    "form",
    { class: "panel", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("p", {}, "Your tenant is the one your credential belongs to. The credential is kept in this tab's session storage only and is sent to this API alone."),
    field("Credential type", kind),
    valueField,
    ...userFields,
    planField,
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
  );
  show();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const c = { kind: kind.value === "key" ? "key" : "cognito", value: value.value.trim() };
      if (kind.value === "cognito-user") c.value = await cognitoToken(cognito, username.value.trim(), password.value);
      if (c.kind === "cognito" && planKey.value.trim()) c.planKey = planKey.value.trim();
      password.value = "";
      sessionStorage.setItem(CREDENTIAL, JSON.stringify(c));
      await api("GET", "/v1/users", { query: { limit: 1 } });
      updateSession();
      showAlert(null);
      route();
    } catch (err) {
      sessionStorage.removeItem(CREDENTIAL);
      updateSession();
      showAlert(err);
      (kind.value === "cognito-user" ? username : value).focus();
    }
  });
  main.append(form);
  if (error) showAlert(error);
  (kind.value === "cognito-user" ? username : value).focus();
}

// ------------------------------------------------------------------------- router
function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(qs || "") };
}

function setHashParams(parts, params) {
  const path = "#/" + parts.map(enc).join("/");
  const qs = params.toString();
  location.hash = qs ? `${path}?${qs}` : path;
}

let generation = 0;
async function route() {
  const mine = ++generation;
  const main = $("main");
  main.replaceChildren();
  const { parts, params } = parseHash();
  for (const a of document.querySelectorAll("[data-nav]")) {
    const active = (a.dataset.nav === "jobs") === (parts[0] === "jobs");
    if (active) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!credential()) {
    signInView(main);
    return;
  }
  const view = h("div", {});
  try {
    if (parts[0] === "jobs") await jobsView(view);
    else if (parts[0] === "user" && parts[1] && parts[2] === "memory" && parts[3]) await memoryView(view, parts[1], parts[3]);
    else if (parts[0] === "user" && parts[1] && parts[2] === "search") await searchView(view, parts[1], params);
    else if (parts[0] === "user" && parts[1]) await memoriesView(view, parts[1], params);
    else await usersView(view, params);
  } catch (err) {
    if (mine !== generation) return;
    showAlert(err);
    if (!credential()) {
      main.replaceChildren();
      signInView(main, err);
      return;
    }
  }
  if (mine !== generation) return; // a newer navigation has started
  main.replaceChildren(view);
  const heading = main.querySelector("h1");
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
    document.title = `${heading.textContent} · memstack`;
  }
}

// -------------------------------------------------------------------------- users
async function usersView(view, params) {
  const cursor = params.get("cursor") || undefined;
  const page = await api("GET", "/v1/users", { query: { limit: 25, cursor } });
  showAlert(null);
  view.append(h("h1", {}, "Users"));
  const open = h("input", { name: "user", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9._@:+=\\-]*", autocomplete: "off" });
  const openForm = h("form", { class: "toolbar", role: "search" }, field("Open a user by id", open), h("button", { type: "submit" }, "Open"));
  openForm.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = userLink(open.value.trim());
  });
  view.append(openForm);
  if (!page.users.length) {
    view.append(
      h("p", { class: "empty" }, cursor ? "No more users." : "No users in this tenant yet. Add messages (POST /v1/memories, or memstack add) and their users appear here."),
    );
  } else {
    view.append(
      table(
        [["User"], ["Raw turns (STM)", "num"], ["Memories (LTM)", "num"], ["Last write"]],
        page.users.map((u) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: userLink(u.user_id) }, u.user_id)),
            h("td", { class: "num" }, u.counts.stm),
            h("td", { class: "num" }, u.counts.ltm),
            h("td", {}, when(u.last_write)),
          ),
        ),
        "Users of this tenant",
      ),
    );
  }
  view.append(pager(params, page.next_cursor));
}

/** First / next page links; the cursor rides in the URL, so the back button goes to the previous page. */
function pager(params, next) {
  const { parts } = parseHash();
  const nav = h("nav", { class: "pager", "aria-label": "Pages" });
  if (params.get("cursor")) {
    const first = new URLSearchParams(params);
    first.delete("cursor");
    nav.append(h("button", { type: "button", class: "secondary", onclick: () => setHashParams(parts, first) }, "First page"));
  }
  if (next) {
    const more = new URLSearchParams(params);
    more.set("cursor", next);
    nav.append(h("button", { type: "button", onclick: () => setHashParams(parts, more) }, "Next page"));
  }
  return nav;
}

// ---------------------------------------------------------------- a user's memories
const FILTERS = ["tier", "kind", "category", "scope", "agent_id", "session_id", "metadata", "where", "after", "before", "include_superseded", "order"];

function localInput(name, iso) {
  // datetime-local shows the browser's local time; the API gets an ISO instant (with its zone).
  let value = "";
  if (iso) {
    const d = new Date(iso);
    if (!Number.isNaN(d.getTime())) value = new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  }
  return h("input", { type: "datetime-local", name, value });
}

function isoOf(value) {
  return value ? new Date(value).toISOString() : "";
}

async function memoriesView(view, user, params) {
  const e = await enums();
  const query = { user_id: user, limit: 50, cursor: params.get("cursor") || undefined };
  // order too: the API orders every page (newest written, or newest event first) and its cursor continues it.
  for (const name of FILTERS) if (params.get(name)) query[name] = params.get(name);
  const page = await api("GET", "/v1/memories", { query });
  showAlert(null);
  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Users"), " / ", user),
    h("h1", {}, `Memories of ${user}`),
  );
  view.append(userToolbar(user));
  view.append(filterForm(user, params, e));
  const memories = page.memories;
  if (!memories.length) {
    view.append(h("p", { class: "empty" }, params.get("cursor") ? "No more memories." : "No memories match these filters."));
  } else {
    view.append(
      table(
        [["Content"], ["Tier"], ["Kind"], ["Category"], ["Event time"], ["Written"], ["Version", "num"], ["Status"]],
        memories.map((m) =>
          h(
            "tr",
            {},
            h("td", { class: "content" }, h("a", { href: memoryLink(user, m.id) }, m.content)),
            h("td", {}, m.tier),
            h("td", {}, m.kind),
            h("td", {}, m.category || "—"),
            h("td", {}, when(m.event_time)),
            h("td", {}, when(m.created_at)),
            h("td", { class: "num" }, m.version),
            h("td", {}, badges(m)),
          ),
        ),
        `Memories of ${user}`,
      ),
    );
  }
  view.append(pager(params, page.next_cursor));
}

/** The filters list and search share: each a control named as the API's parameter, filled from the URL. */
function filterControls(params, e) {
  const any = [["", "any"]];
  const choice = (name) => select(name, any.concat(e[name].map((v) => [v, v])), params.get(name));
  const text = (name, extra) => h("input", { name, value: params.get(name) || "", ...extra });
  return {
    kind: choice("kind"),
    category: choice("category"),
    tier: choice("tier"),
    scope: choice("scope"),
    after: localInput("after", params.get("after")),
    before: localInput("before", params.get("before")),
    metadata: text("metadata", { placeholder: '{"topic":"food"}' }),
    where: text("where", { placeholder: '{"OR":[{"kind":"event"},{"category":"health"}]}' }),
    session_id: text("session_id"),
    agent_id: text("agent_id"),
  };
}

function filterFields(c) {
  return [
    field("Kind", c.kind),
    field("Category", c.category),
    field("Tier", c.tier),
    field("Scope", c.scope),
    field("Happened after", c.after),
    field("Happened before", c.before),
    field("Metadata (JSON)", c.metadata, 'equality, or {"key":{"in":[…]}}'),
    field("Filter expression (JSON)", c.where, "AND / OR / NOT with eq, ne, gt, gte, lt, lte, in, nin, contains"),
    field("Session", c.session_id, "CONTEXT memories show only inside their session"),
    field("Agent", c.agent_id),
  ];
}

/** On submit, the controls' values become the URL's parameters (so a reload or a link repeats it). */
function submitsTo(form, controls, parts) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [name, control] of Object.entries(controls)) {
      let value = control.type === "checkbox" ? (control.checked ? "true" : "") : control.value.trim();
      if (control.type === "datetime-local") value = isoOf(value);
      if (value) next.set(name, value);
    }
    setHashParams(parts, next);
  });
  return form;
}

function filterForm(user, params, e) {
  const controls = {
    ...filterControls(params, e),
    include_superseded: h("input", { type: "checkbox", name: "include_superseded", checked: params.get("include_superseded") === "true" }),
    order: select("order", [["", "newest written first"], ["event_time", "newest event first"]], params.get("order")),
  };
  const form = h(
    "form",
    { class: "panel grid", "aria-label": "Filter memories" },
    filterFields(controls),
    field("Order", controls.order),
    field("Include superseded versions", controls.include_superseded),
    h("div", { class: "actions wide" }, h("a", { class: "button secondary", href: userLink(user) }, "Clear"), h("button", { type: "submit" }, "Apply filters")),
  );
  return submitsTo(form, controls, ["user", user]);
}

function userToolbar(user) {
  const status = h("span", { id: "consolidation-status", role: "status", "aria-live": "polite" });
  return h(
    "div",
    { class: "toolbar" },
    h("a", { class: "button secondary", href: `${userLink(user)}/search` }, "Search playground"),
    h("button", { type: "button", class: "secondary", onclick: () => consolidate(user, status) }, "Run consolidation"),
    h("button", { type: "button", class: "danger", onclick: () => eraseUser(user) }, "Erase user…"),
    status,
  );
}

// ------------------------------------------------------------------- consolidation
async function consolidate(user, status) {
  status.textContent = "Starting consolidation…";
  let answer;
  try {
    answer = await api("POST", "/v1/consolidations", { body: { user_id: user, sync: false } });
  } catch (err) {
    status.textContent = "";
    showAlert(err);
    return;
  }
  if (answer.status !== "queued" || !answer.job_id) {
    status.textContent = `Consolidation ${answer.status}: read ${answer.read}, wrote ${answer.written}.`;
    return;
  }
  status.textContent = `Consolidation queued (job ${answer.job_id}).`;
  // Watch the job leave the queue; the page re-reads the user's memories when it is done.
  for (let tries = 0; tries < 600; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    let jobs;
    try {
      jobs = await api("GET", "/v1/jobs");
    } catch (err) {
      showAlert(err);
      return;
    }
    const dead = jobs.dead_lettered.find((j) => j.id === answer.job_id);
    if (dead) {
      status.textContent = `Consolidation failed after ${dead.attempts} attempts: ${dead.error || "no error recorded"}. It is dead-lettered (see Jobs).`;
      return;
    }
    if (jobs.waiting === null) {
      status.textContent = `Consolidation queued (job ${answer.job_id}); this queue cannot report progress, reload later.`;
      return;
    }
    const waiting = jobs.waiting.find((j) => j.id === answer.job_id);
    if (!waiting) {
      notice(`Consolidation of ${user} finished.`);
      if (location.hash.startsWith(userLink(user))) route();
      return;
    }
    status.textContent = `Consolidation ${waiting.status === "running" ? "running" : "queued"} (job ${answer.job_id}, attempt ${waiting.attempts}).`;
  }
}

// ------------------------------------------------------------------ typed confirm
/** A modal that resolves true only when OK is pressed (and, with ``typed``, that text was typed). */
function confirmDialog(title, body, okText, typed) {
  const dialog = $("dialog");
  $("dialog-title").textContent = title;
  const content = $("dialog-body");
  content.replaceChildren(...[].concat(body));
  const ok = $("dialog-ok");
  ok.textContent = okText;
  let input = null;
  if (typed) {
    input = h("input", { autocomplete: "off", spellcheck: "false" });
    content.append(field(`Type ${typed} to confirm`, input));
    ok.disabled = true;
    input.addEventListener("input", () => (ok.disabled = input.value !== typed));
  } else {
    ok.disabled = false;
  }
  return new Promise((resolve) => {
    const done = (value) => {
      dialog.removeEventListener("close", onClose);
      $("dialog-cancel").onclick = null;
      $("dialog-form").onsubmit = null;
      if (dialog.open) dialog.close();
      resolve(value);
    };
    const onClose = () => done(false);
    dialog.addEventListener("close", onClose);
    $("dialog-cancel").onclick = () => done(false);
    $("dialog-form").onsubmit = (event) => {
      event.preventDefault();
      done(!typed || input.value === typed);
    };
    dialog.showModal();
    (input || $("dialog-cancel")).focus();
  });
}

async function eraseUser(user) {
  const yes = await confirmDialog(
    `Erase ${user}?`,
    [h("p", {}, "Every memory, raw turn, queued job and version of this user is deleted from every store. This cannot be undone.")],
    "Erase user",
    user,
  );
  if (!yes) return;
  try {
    const answer = await api("DELETE", `/v1/users/${enc(user)}`);
    const counts = Object.entries(answer.erased).map(([k, v]) => `${k} ${v}`).join(", ");
    notice(`Erased ${user} (${counts}).`);
    location.hash = "#/";
  } catch (err) {
    showAlert(err);
  }
}

// --------------------------------------------------------------------- one memory
async function memoryView(view, user, id) {
  // The history is readable for every version, tombstones included (a GET of a tombstone is a 404).
  const chain = (await api("GET", `/v1/memories/${enc(id)}/history`, { query: { user_id: user } })).memories;
  const m = chain.find((r) => r.id === id) || chain[chain.length - 1];
  const sources = await Promise.all(
    chain.map((r) => api("GET", `/v1/memories/${enc(r.id)}/sources`, { query: { user_id: user } }).then((s) => s.sources)),
  );
  showAlert(null);
  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Users"), " / ", h("a", { href: userLink(user) }, user), " / memory"),
    h("h1", {}, `Memory v${m.version}`, " ", badges(m)),
    h("p", { class: "memory-content", id: "memory-content" }, m.deleted ? "(deleted)" : m.content),
  );
  view.append(memoryActions(user, m, chain));
  const facts = [
    ["Id", m.id],
    ["Kind", m.kind],
    ["Category", m.category || "—"],
    ["Scope", m.scope],
    ["Tier", m.tier],
    ["Session", m.session_id || "—"],
    ["Agent", m.agent_id || "—"],
    ["Speaker", m.speaker || "—"],
    ["Event time", when(m.event_time)],
    ["Written", when(m.created_at)],
    ["Superseded", when(m.superseded_at)],
  ];
  view.append(
    h(
      "div",
      { class: "columns" },
      h("section", { class: "panel", "aria-labelledby": "facts-title" }, h("h2", { id: "facts-title" }, "Details"), h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))),
      h("section", { class: "panel", "aria-labelledby": "meta-title" }, h("h2", { id: "meta-title" }, "Metadata"), Object.keys(m.metadata || {}).length ? h("pre", {}, JSON.stringify(m.metadata, null, 2)) : h("p", { class: "empty" }, "No metadata.")),
    ),
  );
  view.append(h("h2", { id: "timeline-title" }, `Version timeline (${chain.length})`), timeline(user, chain, sources, id));
}

function timeline(user, chain, sources, id) {
  return h(
    "ol",
    { class: "timeline", "aria-labelledby": "timeline-title" },
    chain.map((v, i) => {
      const prev = chain.find((r) => r.id === v.replaces_id);
      const next = chain.find((r) => r.replaces_id === v.id);
      const what = v.deleted ? "deleted" : !prev ? "created" : v.metadata && v.metadata.edited === "restored" ? "restored" : "replaced";
      return h(
        "li",
        { class: [v.is_current ? "is-current" : "", v.deleted ? "is-deleted" : ""].join(" "), "aria-current": v.id === id ? "true" : null, dataset: { version: v.version } },
        h(
          "div",
          { class: "version-head" },
          h("strong", {}, v.id === id ? `v${v.version} (this version)` : h("a", { href: memoryLink(user, v.id) }, `v${v.version}`)),
          h("span", {}, `${what} ${when(v.created_at)}`),
          badges(v),
          prev ? h("span", { class: "hint" }, `replaces v${prev.version}`) : null,
          next ? h("span", { class: "hint" }, `replaced by v${next.version} ${when(v.superseded_at)}`) : null,
        ),
        v.deleted ? null : h("p", { class: "version-content" }, v.content),
        turnList(user, sources[i]),
      );
    }),
  );
}

function turnList(user, sources) {
  if (!sources || !sources.length) return h("p", { class: "hint" }, "No source turns recorded.");
  return h(
    "div",
    {},
    h("span", { class: "hint" }, `From ${sources.length} turn${sources.length === 1 ? "" : "s"}:`),
    h(
      "ul",
      { class: "turns" },
      sources.map((s) =>
        s.turn
          ? h(
              "li",
              {},
              h("a", { href: memoryLink(user, s.turn.id), class: "turn" }, `${s.turn.speaker || (s.turn.metadata && s.turn.metadata.role) || "turn"}: ${s.turn.content}`),
              h("span", { class: "hint" }, ` · ${when(s.turn.event_time || s.turn.created_at)} · message ${s.message_id}`),
            )
          : h("li", {}, `message ${s.message_id} (its raw turn is no longer stored)`),
      ),
    ),
  );
}

function memoryActions(user, m, chain) {
  const latest = chain[chain.length - 1];
  const bar = h("div", { class: "toolbar" });
  if (m.is_current && !m.deleted) {
    const edit = h("textarea", { name: "content", required: true }, m.content);
    const editButton = h("button", { type: "button", onclick: () => { form.hidden = false; edit.focus(); } }, "Edit");
    // Cancel (or Esc, as in the dialogs) hides the form and gives focus back to the Edit button.
    const cancel = () => {
      form.hidden = true;
      editButton.focus();
    };
    const form = h(
      "form",
      { class: "panel", hidden: true, "aria-label": "Edit memory" },
      field("New content", edit, "saving writes a new version; this one stays in the timeline"),
      h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", onclick: cancel }, "Cancel"), h("button", { type: "submit" }, "Save new version")),
    );
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") cancel();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const saved = await api("PATCH", `/v1/memories/${enc(m.id)}`, { body: { user_id: user, content: edit.value } });
        notice(`Saved version ${saved.version}.`);
        location.hash = memoryLink(user, saved.id);
      } catch (err) {
        showAlert(err);
      }
    });
    bar.append(
      editButton,
      h("button", { type: "button", class: "danger", onclick: () => deleteMemory(user, m) }, "Delete…"),
    );
    return h("div", {}, bar, form);
  }
  const target = m.deleted ? [...chain].reverse().find((r) => r.version < m.version && !r.deleted) : m;
  if (target && !(latest.id === target.id)) {
    bar.append(h("button", { type: "button", onclick: () => restore(user, m) }, m.deleted || latest.deleted ? `Restore v${target.version}` : `Make v${target.version} current again`));
  }
  if (latest.id !== m.id) bar.append(h("a", { class: "button secondary", href: memoryLink(user, latest.id) }, `Go to the latest version (v${latest.version})`));
  return bar;
}

async function deleteMemory(user, m) {
  const yes = await confirmDialog("Delete this memory?", [h("p", {}, "A tombstone version is written: search stops showing it, the timeline keeps every version, and it can be restored.")], "Delete");
  if (!yes) return;
  try {
    const answer = await api("DELETE", `/v1/memories/${enc(m.id)}`, { query: { user_id: user } });
    notice(`Deleted (tombstone v${answer.version}).`);
    location.hash = memoryLink(user, answer.tombstone_id);
  } catch (err) {
    showAlert(err);
  }
}

async function restore(user, m) {
  try {
    const saved = await api("POST", `/v1/memories/${enc(m.id)}/restore`, { body: { user_id: user } });
    notice(`Restored as version ${saved.version}.`);
    location.hash = memoryLink(user, saved.id);
  } catch (err) {
    showAlert(err);
  }
}

// ---------------------------------------------------------------- search playground
async function searchView(view, user, params) {
  const e = await enums();
  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Users"), " / ", h("a", { href: userLink(user) }, user), " / search"),
    h("h1", {}, `Search ${user}'s memories`),
  );
  const c = {
    query: h("textarea", { name: "query", required: true, rows: 2 }, params.get("query") || ""),
    top_k: h("input", { type: "number", name: "top_k", min: 1, max: 100, value: params.get("top_k") || 10 }),
    min_score: h("input", { type: "number", name: "min_score", min: 0, max: 1, step: 0.01, value: params.get("min_score") || "" }),
    reference_time: localInput("reference_time", params.get("reference_time")),
    include_history: h("input", { type: "checkbox", name: "include_history", checked: params.get("include_history") === "true" }),
    ...filterControls(params, e),
  };
  const form = h(
    "form",
    { class: "panel grid", role: "search", "aria-label": "Search options" },
    h("div", { class: "wide" }, field("Query", c.query)),
    field("Results (top_k)", c.top_k),
    field("Minimum score", c.min_score, "0–1, a calibrated probability"),
    field("Reference time", c.reference_time, "'now' for relative dates in the query"),
    filterFields(c),
    field("Include history (older versions)", c.include_history),
    h("div", { class: "actions wide" }, h("button", { type: "submit" }, "Search")),
  );
  submitsTo(form, c, ["user", user, "search"]);
  view.append(form);
  if (!params.get("query")) {
    view.append(h("p", { class: "empty" }, "Type a query to see what is found and why each result ranks where it does."));
    return;
  }
  const json = (name) => {
    if (!params.get(name)) return undefined;
    try {
      return JSON.parse(params.get(name));
    } catch {
      throw new Error(`${name} must be JSON, e.g. ${name === "where" ? '{"kind":"event"}' : '{"topic":"food"}'}.`);
    }
  };
  const filters = {};
  for (const name of ["kind", "category", "tier", "scope", "after", "before"]) if (params.get(name)) filters[name] = params.get(name);
  for (const name of ["metadata", "where"]) if (params.get(name)) filters[name] = json(name);
  const body = {
    user_id: user,
    query: params.get("query"),
    top_k: Number(params.get("top_k") || 10),
    explain: true,
    include_history: params.get("include_history") === "true",
  };
  if (Object.keys(filters).length) body.filters = filters;
  if (params.get("min_score")) body.min_score = Number(params.get("min_score"));
  if (params.get("reference_time")) body.reference_time = params.get("reference_time");
  if (params.get("session_id")) body.session_id = params.get("session_id");
  if (params.get("agent_id")) body.agent_id = params.get("agent_id");
  const answer = await api("POST", "/v1/memories/search", { body });
  showAlert(null);
  view.append(explainSummary(answer));
  view.append(h("h2", { id: "results-title" }, `Results (${answer.results.length})`));
  if (!answer.results.length) {
    view.append(h("p", { class: "empty" }, "Nothing matched. Try other words, fewer filters or a lower minimum score."));
    return;
  }
  view.append(h("ol", { class: "hits", "aria-labelledby": "results-title" }, answer.results.map((hit, i) => hitCard(user, hit, i + 1))));
}

function explainSummary(answer) {
  const x = answer.explain || { analysis: {}, stage_durations: {}, stage_status: {} };
  const a = x.analysis || {};
  const w = a.window;
  const analysis = [
    ["Reference time", when(a.reference_time)],
    ["Time in the query", w ? `${w.phrase || "a window"}: ${when(w.start)} – ${when(w.end)}` : "none"],
    ["Temporal intent", a.temporal_intent ? "yes" : "no"],
    ["History intent", a.history_intent ? "yes (older versions are searched too)" : "no"],
    ["Cues", (a.cues || []).join("; ") || "—"],
  ];
  const durations = Object.entries(x.stage_durations || {});
  const total = (x.stage_durations || {}).total || Math.max(1, ...durations.map(([, v]) => v));
  return h(
    "div",
    { class: "columns", id: "explain" },
    h(
      "section",
      { class: "panel", "aria-labelledby": "analysis-title" },
      h("h2", { id: "analysis-title" }, "Query analysis"),
      h("dl", { class: "facts" }, analysis.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      answer.degraded && answer.degraded.length ? h("p", { class: "alert" }, `Degraded: ${answer.degraded.join(", ")} skipped after a failure.`) : null,
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "durations-title" },
      h("h2", { id: "durations-title" }, "Stage durations"),
      table(
        [["Stage"], ["ms", "num"], ["", ""], ["What it did"]],
        durations.map(([stage, ms]) =>
          h(
            "tr",
            { dataset: { stage } },
            h("td", {}, stage),
            h("td", { class: "num" }, ms.toFixed(2)),
            h("td", {}, h("span", { class: "bar", style: null, "aria-hidden": "true", dataset: { width: Math.round((100 * ms) / total) } })),
            h("td", {}, (x.stage_status || {})[stage] || ""),
          ),
        ),
        "Stage durations",
      ),
    ),
  );
}

function hitCard(user, hit, rank) {
  const stages = hit.stages || {};
  const ranks = Object.entries(stages).filter(([k]) => k.startsWith("rank_after_"));
  const scores = Object.entries(stages).filter(([k]) => !k.startsWith("rank_after_"));
  let before = null;
  const moves = ranks.map(([k, r]) => {
    const stage = k.slice("rank_after_".length);
    const delta = before === null ? 0 : before - r;
    before = r;
    const arrow = delta > 0 ? h("span", { class: "up" }, ` ▲${delta}`) : delta < 0 ? h("span", { class: "down" }, ` ▼${-delta}`) : null;
    return h("li", { dataset: { stage } }, `${stage}: #${r}`, arrow, delta ? h("span", { class: "visually-hidden" }, delta > 0 ? ` (up ${delta})` : ` (down ${-delta})`) : null);
  });
  return h(
    "li",
    { class: "hit", dataset: { id: hit.id } },
    h(
      "div",
      { class: "hit-head" },
      h("span", { class: "rank" }, `#${rank}`),
      h("span", {}, `score ${hit.score.toFixed(3)}`),
      h("span", { class: "badge" }, hit.tier),
      h("span", { class: "badge" }, hit.kind),
      hit.superseded ? h("span", { class: "badge superseded" }, "older version") : null,
    ),
    h("p", { class: "content" }, h("a", { href: memoryLink(user, hit.id) }, hit.content)),
    ranks.length ? [h("span", { class: "hint" }, "Rank after each stage:"), h("ol", { class: "moves", "aria-label": "Rank after each stage" }, moves)] : null,
    scores.length
      ? h(
          "details",
          {},
          h("summary", {}, "Score of every stage"),
          table([["Stage"], ["Value", "num"]], scores.map(([k, v]) => h("tr", { dataset: { stage: k } }, h("td", {}, k), h("td", { class: "num" }, Number(v).toFixed(4)))), "Stage scores"),
        )
      : null,
  );
}

// --------------------------------------------------------------------------- jobs
async function jobsView(view) {
  const jobs = await api("GET", "/v1/jobs");
  showAlert(null);
  view.append(h("h1", {}, "Background jobs"));
  const columns = [["Job"], ["Type"], ["User"], ["Status"], ["Attempts", "num"], ["Last error"]];
  const row = (j, action) =>
    h(
      "tr",
      { dataset: { job: j.id } },
      h("td", {}, h("code", {}, j.id)),
      h("td", {}, j.type),
      h("td", {}, j.user_id ? h("a", { href: userLink(j.user_id) }, j.user_id) : "—"),
      h("td", {}, j.status),
      h("td", { class: "num" }, j.attempts),
      h("td", { class: "content" }, j.error || "—", action || null),
    );
  view.append(h("h2", {}, "Queued"));
  if (jobs.waiting === null) view.append(h("p", { class: "empty" }, "This queue (SQS) cannot list waiting jobs without taking them; only dead-lettered jobs are shown."));
  else if (!jobs.waiting.length) view.append(h("p", { class: "empty" }, "Nothing is queued: every job has run."));
  else view.append(table(columns, jobs.waiting.map((j) => row(j)), "Queued jobs"));
  view.append(h("h2", {}, "Dead-lettered"));
  if (!jobs.dead_lettered.length) {
    view.append(h("p", { class: "empty" }, "No job has failed for good."));
    return;
  }
  const redrive = async (ids) => {
    try {
      const answer = await api("POST", "/v1/jobs/redrive", { body: ids ? { job_ids: ids } : {} });
      notice(`Redrove ${answer.redriven} job${answer.redriven === 1 ? "" : "s"}.`);
      route();
    } catch (err) {
      showAlert(err);
    }
  };
  view.append(
    h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => redrive(null) }, `Redrive all ${jobs.dead_lettered.length}`)),
    table(columns, jobs.dead_lettered.map((j) => row(j, h("div", {}, h("button", { type: "button", class: "secondary", onclick: () => redrive([j.id]) }, "Redrive")))), "Dead-lettered jobs"),
  );
}

// -------------------------------------------------------------------------- start
document.addEventListener("DOMContentLoaded", () => {
  // The skip link moves focus only: as a "#main" link it would change the hash, which is the route.
  document.querySelector("a.skip").addEventListener("click", (event) => {
    event.preventDefault();
    $("main").focus();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(CREDENTIAL);
    updateSession();
    notice("Signed out.");
    location.hash = "#/";
    route();
  });
  window.addEventListener("hashchange", () => {
    showAlert(null);
    if (noticeFor > 0) noticeFor -= 1;
    else notice(null);
    route();
  });
  updateSession();
  route();
});
// The bar widths come from data-width (a style attribute would need 'unsafe-inline' in the CSP).
new MutationObserver(() => {
  for (const bar of document.querySelectorAll(".bar[data-width]")) {
    bar.style.width = `${Math.max(2, Number(bar.dataset.width)) * 1.2}px`;
    bar.removeAttribute("data-width");
  }
}).observe(document.documentElement, { childList: true, subtree: true });
