"""Which trained version the policy asks vLLM for: the newest one vLLM serves.

Delivery: follows webgym.models.served (compacted; no group, nothing committed) from the
beginning on every start, so a restarted policy is back on the newest served version
before it decides anything (`ready`). The model loader announces a version only once every
vLLM replica lists its name, so switching on the announcement never asks for a name vLLM
lacks (a replica restarted since is passed over until it has it again: replicas.py).
An episode requested on version N (the controller names only served versions) is never
decided on an older one, even when its request overtakes the announcement (`pin`).
"""

from __future__ import annotations

import asyncio
import logging

from processors.policy.policies import VllmPolicy
from webgym_common.config import Settings
from webgym_common.events import Event, ModelServed
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic
from webgym_common.versions import served_name, version_number

log = logging.getLogger("webgym.policy")


class ServedModels:
    def __init__(self, settings: Settings, policy: VllmPolicy) -> None:
        self.settings, self.policy = settings, policy
        self.model_name = settings.trainer.model_name
        self.using = 0  # the base model
        self.ready = asyncio.Event()

    def switch(self, version: int, name: str) -> None:
        if version > self.using:
            self.using = version
            self.policy.use_model(name, f"v{version}")
            log.info("policy now uses %s (v%d)", name, version)

    def seen(self, event: Event) -> None:
        if isinstance(event, ModelServed) and event.model_name == self.model_name:
            self.switch(event.version, event.served_name)

    def pin(self, request_tag: str) -> None:
        """At least the version the episode was requested on."""
        wanted = version_number(request_tag)
        if wanted:
            self.switch(wanted, served_name(self.model_name, wanted))

    async def follow(self) -> None:
        async with EventProducer(self.settings, client_id="policy-models") as producer:
            async with EventConsumer(self.settings, [Topic.MODELS_SERVED], None, producer,
                                     client_id="policy-models") as models:
                for received in await read_to_end(models):
                    self.seen(received.event)
                self.ready.set()
                async for received in models.events():
                    self.seen(received.event)
