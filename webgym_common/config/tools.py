"""Settings of the tools beside the pipeline: the monitor and the environment server."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from webgym_common.choices import WandbMode


class MonitorSettings(BaseModel):
    """`webgym monitor`: the read-only web app that follows the topics (consumers/monitor/)."""

    model_config = ConfigDict(frozen=True)

    # Loopback by default: the pages show task text, model output and screenshots.
    host: str = "127.0.0.1"
    port: int = Field(18780, ge=1, le=65535, description="the monitor's port")
    # Names it answers to beside its host, localhost and 127.0.0.1 (webgym_common.hosts: a
    # request for any other name is refused, against DNS rebinding from a browser).
    allowed_hosts: tuple[str, ...] = ()
    # The scored topic the trajectory viewer and the grid's rewards read: empty = the
    # registry's <prefix>.episodes.scored; a full topic name picks a re-scored history.
    scored_topic: str = ""
    # Episodes kept with their steps (the oldest are forgotten first); bounds memory.
    max_episodes: int = Field(2000, ge=10)
    dead_letters: int = Field(500, ge=1, description="the newest N dead letters shown")
    lag_interval_s: float = Field(2.0, gt=0, description="how often consumer lag is read")
    # Each browser tab's queue of live updates; a tab that falls this far behind is
    # disconnected (its EventSource reconnects and the page reloads).
    client_queue: int = Field(1000, ge=10)
    # TensorBoard event files of the metrics, evaluations and training losses; unset:
    # <data_dir>/tensorboard. Rewritten from the log at each start.
    tensorboard: bool = True
    tensorboard_dir: Path | None = Field(
        None, description="where the TensorBoard files go; unset: <data_dir>/tensorboard")
    # Weights & Biases: the same scalars to this project when set (a new run each start),
    # under <data_dir>/wandb; offline by default (`wandb sync` uploads later).
    wandb_project: str = ""
    wandb_mode: WandbMode = Field(
        WandbMode.OFFLINE, description="offline: files only; online: uploaded as they are written")


class EnvServerSettings(BaseModel):
    """`webgym envserver`: AgentGym's environment-server API over the pipeline
    (producers/envserver/)."""

    model_config = ConfigDict(frozen=True)

    # Loopback by default: whoever reaches it can drive browsers.
    host: str = "127.0.0.1"
    port: int = Field(18790, ge=1, le=65535, description="the env server's port")
    # Names it answers to beside its host, localhost and 127.0.0.1 (webgym_common.hosts);
    # under compose the service name its clients use ("envserver").
    allowed_hosts: tuple[str, ...] = ()
    max_envs: int = Field(256, ge=1, le=4096, description="envs open at once (/create: 503)")
    # An env no request touched for this long is closed (its episode cancelled).
    idle_timeout_s: float = Field(900.0, gt=0)
    reap_interval_s: float = Field(5.0, gt=0, description="how often idle envs are looked for")
    # An episode ends as timeout this long after its reset, used or not.
    episode_timeout_s: float = Field(3600.0, gt=0)
    reset_timeout_s: float = Field(60.0, gt=0, description="wait for the start page's step")
    step_timeout_s: float = Field(60.0, gt=0, description="wait for an action's observation")
    score_timeout_s: float = Field(60.0, gt=0, description="wait for the evaluator's reward")
    max_steps: int | None = Field(None, ge=1, description="per episode; unset: the task's")
    catalog_refresh_s: float = Field(30.0, ge=0, description="the task list is read again")
    max_observation_chars: int = Field(16000, ge=200, description="the tree is cut beyond")
    # `webgym pipeline up` starts it beside the other processes (supervised, restarted if
    # it dies) only when this is on: it binds a port and drives browsers for whoever
    # reaches it, so nobody gets one without asking (`pipeline up --with-envserver`).
    supervised: bool = False
