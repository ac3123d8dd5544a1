"""RocketMQ 5's controller: elects the master of each broker group (docs/ha.md, controller mode).

`state.py` is the sans-I/O state machine, `heartbeats.py` the leader's view of live brokers,
`raft.py` replicates the state with pysyncobj, `server.py` answers the CONTROLLER_* codes.
"""
