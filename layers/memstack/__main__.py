"""``python -m memstack`` runs the CLI."""

from memstack.cli import main

if __name__ == "__main__":
    main()
