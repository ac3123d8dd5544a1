"""The ``rocketq`` command: ``up`` / ``namesrv`` / ``broker`` servers (and, later, admin commands)."""
