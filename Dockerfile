# One image for every pipeline process; docker-compose.yml picks the process
# with the command (`webgym worker browser`, `webgym worker policy`, ...).
FROM python:3.11-slim-bookworm AS pipeline

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The browser comes from Debian, never from Playwright's own downloader, which
# needs a vendor CDN. The headless shell is lighter and steadier than full
# Chromium for screenshots; the workers launch
# /usr/lib/chromium/chromium-headless-shell. Fonts are installed explicitly
# (--no-install-recommends drops them) so pages, including CJK sites, render
# legibly for the policy and the judge.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        ca-certificates \
        chromium-headless-shell \
        fonts-liberation \
        fonts-noto-cjk \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies get their own layer, keyed on pyproject.toml and the lock only,
# so a source edit does not reinstall them. The lock is optional (the glob
# copies nothing when it is absent).
COPY pyproject.toml requirements.lock* ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep=chr(10))" > /tmp/deps.txt \
 && if [ -f requirements.lock ]; then \
        pip install -r /tmp/deps.txt -c requirements.lock; \
    else \
        pip install -r /tmp/deps.txt; \
    fi \
 && rm /tmp/deps.txt

COPY . .
RUN if [ -f requirements.lock ]; then \
        pip install -e . -c requirements.lock; \
    else \
        pip install -e .; \
    fi

# The pipeline runs as an unprivileged user: Chromium renders untrusted pages
# (with --no-sandbox, since a container has no user namespaces for its own
# sandbox), so a compromised renderer must not be root in the container.
RUN useradd --create-home --uid 10001 webgym
USER webgym

ENTRYPOINT ["webgym"]
CMD ["--help"]

# The trainer: the same image plus LLaMA-Factory in its own venv (pinned by the
# trainer settings), prepared at build time so a trainer container starts at once.
FROM pipeline AS trainer
RUN webgym infra prepare --with-trainer
