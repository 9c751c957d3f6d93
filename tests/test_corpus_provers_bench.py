"""`proofrl eval search`'s own parts: the policy of row (d) and the CPU count of sandboxed Coq processes."""

from __future__ import annotations

import subprocess
import sys

from proofrl.eval.provers import DescendantCPU, WithAutomation
from proofrl.policy.tactic import Proposal, propose_batch


class Fixed:
    name = "fixed"

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return [Proposal("intros; lia.", -1.0, -1.0), Proposal("simpl.", -2.0, -2.0)][:k]


def test_row_d_proposes_the_automation_first_then_the_model_without_repeats():
    p = WithAutomation(Fixed(), ("intros; lia.", "intros; auto."))
    for got in (p.propose("⊢ True", 2), propose_batch(p, ["⊢ True"], 2)[0]):
        assert [q.tactic for q in got] == ["intros; lia.", "intros; auto.", "simpl."]
        assert got[0].logprob_sum == 0.0 and got[2].logprob_sum == -2.0


def test_cpu_of_a_grandchild_is_counted():
    busy = f"{sys.executable} -c 'import time; t = time.process_time()\nwhile time.process_time() - t < 0.6: pass'"
    with DescendantCPU(interval=0.05) as cpu:
        subprocess.run(["bash", "-c", busy + "; true"], check=True)  # bash waits: python is a grandchild
    assert cpu.seconds >= 0.4
