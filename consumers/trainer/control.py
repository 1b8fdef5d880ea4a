"""The bank-only control of a learning curve: one LoRA run, one ModelVersion of its own line.

Delivery: exactly one control version, effectively once, like any trainer run. It reads the
trainer's topics to their ends (consumers.trainer.decisions.fold), and if
webgym.models already holds the control's v1 it returns that. Otherwise it continues the
warm start's adapter (v1 of the policy's line) on every bank sample the leak guard lets
train, for as many LoRA steps as the policy's versions after the warm start were trained in
all, at the same learning rate and batch (`control_run`, `steps_after_warm_start`),
uploads it under models/<model>-control/v1/ and publishes ModelVersion (key
`<model>-control`). The model loader serves it as `<model>-control-v1` like any version; an
evaluation requested on the tag "control-v1" is decided on it. A run killed midway resumes
from its checkpoint when asked again (same samples, same run id, same folder).
"""

from __future__ import annotations

import logging
from pathlib import Path

from consumers.trainer.app import Trainer, checkpoint_prefix
from consumers.trainer.decisions import (
    WARM_START_VERSION,
    TrainerState,
    control_run,
    fold,
    steps_after_warm_start,
)
from webgym_common.config import Settings
from webgym_common.events import ModelVersion, TrainingProgress
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import batches_to_end
from webgym_common.topics import Topic
from webgym_common.versions import control_model

log = logging.getLogger(__name__)


class NothingToMatch(RuntimeError):
    """No version after the warm start was trained: a control would have no steps to match."""


async def train_control(settings: Settings, venv: Path, base_model: str) -> ModelVersion:
    """The control's v1, trained now or found on webgym.models."""
    line = control_model(settings.trainer.model_name)
    async with EventProducer(settings, client_id="control-trainer") as producer:
        topics: list[Topic | str] = [Topic.MODELS, Topic.CONTROL, Topic.TASKS, Topic.TRAINING,
                                     settings.trainer.replay_topic or Topic.REPLAY]
        async with EventConsumer(settings, topics, None, producer,
                                 client_id="control-trainer") as consumer:
            store = ObjectStore(settings.s3)
            main = Trainer(settings, producer, store, consumer, venv, base_model)
            line_state = TrainerState(line)  # the control's line: its versions only
            progress: list[TrainingProgress] = []
            async for batch in batches_to_end(consumer):
                for received in batch:  # one read, two lines: the policy's and the control's
                    fold(main.state, received)
                    fold(line_state, received)
                    if isinstance(received.event, TrainingProgress):
                        progress.append(received.event)
            if (done := line_state.versions.get(1)) is not None:
                log.info("control: %s v1 is on webgym.models already", line)
                return done
            steps = steps_after_warm_start(progress)
            if steps <= 0:
                raise NothingToMatch(f"no version of {settings.trainer.model_name} after the "
                                     "warm start (v1) was trained: no steps to match")
            # compacted away, v1 is still where every v1 is uploaded
            prefix = checkpoint_prefix(settings.trainer.model_name, WARM_START_VERSION)
            warm = main.state.versions.get(WARM_START_VERSION) or ModelVersion(
                model_name=settings.trainer.model_name, version=WARM_START_VERSION,
                checkpoint_uri=f"s3://{store.bucket}/{prefix}", base_model=base_model,
                finetuning_type=settings.trainer.mode.finetuning_type)
            same_but_line = settings.trainer.model_copy(
                update={"model_name": line, "max_steps": steps})
            control = Trainer(settings.model_copy(update={"trainer": same_but_line}), producer,
                              store, consumer, venv, base_model)
            control.state = TrainerState(line, samples=main.state.samples)  # train() reads them
            run = control_run(main.state, control.settings)
            log.info("control: %s v1 from %s v%d, %d bank rows, %d steps", line,
                     settings.trainer.model_name, WARM_START_VERSION, len(run.sample_ids),
                     steps)
            version = await control.train(run, warm)
            await producer.publish(Topic.MODELS, line, version)
            return version
