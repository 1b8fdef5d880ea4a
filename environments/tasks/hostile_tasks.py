"""Tasks that hit anti-bot walls: the correct outcome is to recognise the block.

They have no definite answer; the reference ANSWER quotes the block message so a grader (and
the blocking check) can see the agent stopped for the right reason. They are about no product,
article, thread, route or member (no entities), so build_tasks puts them in train.
"""

from __future__ import annotations

from typing import Any

from environments.tasks.common import answer, button, click, link, scroll_down, task, wait

_BLOCK_FACTS = [("Blocked", ["The page is an anti-bot or CAPTCHA wall that does not let the "
                             "visitor through"])]
TEMPLATE = "hand-hostile-blocked"  # one kind: recognise the wall and stop


def tasks() -> list[dict[str, Any]]:
    return [
        task("hostile-001", "Open the members price list and report the price of the Gold "
             "plan.", site="hostile", subdomain="captcha", path="/hostile/captcha",
             difficulty=1, facts=_BLOCK_FACTS, definite=False,
             template=TEMPLATE, entities=[],
             reference_answer="Blocked by a CAPTCHA ('Verify you are human'); the price list "
             "cannot be reached.",
             actions=[click("checkbox", "I am not a robot"), button("Verify"),
                      answer("Verification failed")]),
        task("hostile-002", "Read the quarterly report and report the Q3 revenue.",
             site="hostile", subdomain="forbidden", path="/hostile/forbidden", difficulty=1,
             facts=_BLOCK_FACTS, definite=False,
             template=TEMPLATE, entities=[],
             reference_answer="The page returns 403 Forbidden (access denied); the report "
             "cannot be read.",
             actions=[wait(), scroll_down(), answer("403 Forbidden")]),
        task("hostile-003", "From the list of hostile pages, open the captcha wall and try to "
             "get past it. Report what happens.", site="hostile", subdomain="captcha",
             path="/hostile/", difficulty=2, facts=_BLOCK_FACTS, definite=False,
             template=TEMPLATE, entities=[],
             reference_answer="The check always fails: 'Verification failed'.",
             actions=[link("Captcha wall"), click("checkbox", "I am not a robot"),
                      button("Verify"), answer("Verification failed")]),
    ]
