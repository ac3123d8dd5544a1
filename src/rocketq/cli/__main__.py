"""``python -m rocketq.cli`` is the ``rocketq`` command."""

from rocketq.cli.main import main

raise SystemExit(main())
