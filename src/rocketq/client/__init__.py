"""The client SDK: MQClientInstance (per client id), the RPC layer, producers and consumers.

Users import from ``rocketq`` (sync) or ``rocketq.aio`` (asyncio); the modules below are the
building blocks those facades are made of.
"""
