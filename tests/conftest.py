"""What every test run shares: the compose test (tests/compose) runs only when asked.

It builds images and starts containers (minutes, a Docker engine): `make compose-test`
sets WEBGYM_COMPOSE_TEST=1.
"""

import os

collect_ignore = [] if os.environ.get("WEBGYM_COMPOSE_TEST") else ["compose"]
