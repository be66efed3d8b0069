"""How the local run judges what its runs printed (launcher.local.checks): a run that reports nothing fails
every check it was owed, with a reason, rather than passing by silence."""
import dataclasses
import json

import pytest

from launcher.local.checks import MARK, Check, RunRecord, judge_runs


def _run(*facts):
    run = RunRecord(exit_code=0, wall_s=1.0)
    for fact in facts:
        assert run.add_line(MARK + json.dumps(fact))
    return run


def test_a_run_that_reported_nothing_fails_each_check_with_its_reason():
    checks = {c.name: c for c in judge_runs(_run(), _run(), 3, activation_checkpointing=True, tensor_parallel=1)}
    assert {name: (c.ok, c.detail) for name, c in checks.items()} == {
        "loss falls": (False, "the script did not re-measure its first batch"),
        "step-0 gradient norm equal with and without activation checkpointing":
            (False, "the script reported no gradient norm to compare"),
        "each rank holds 1/shard-degree of the parameters": (False, "the script reported no sharding"),
        "every decoder layer is its own FSDP unit and is checkpointed": (False, "the script reported no wrapping"),
        "checkpoint saved and loaded back bit for bit": (False, "no checkpoint was saved"),
        "one checkpoint folder per tensor-parallel rank": (None, "tensor parallel degree 1 here"),
        "gradient norm equal on every rank": (False, "the script reported no per-rank gradient norms"),
        "training resumes from the checkpoint": (False, "expected a resume from step 3, got no checkpoint"),
    }


def test_a_resume_from_another_step_fails_and_names_the_step():
    resumed = judge_runs(_run(), _run({"check": "resumed", "step": 5}), 3, activation_checkpointing=False)[-1]
    assert (resumed.ok, resumed.detail) == (False, "expected a resume from step 3, got 5")


def test_parameters_left_on_the_meta_device_fail_sharding_and_the_first_three_are_named():
    fact = {"check": "sharding", "total": 1000, "held": [500, 500], "shard_degree": 2, "strategy": "FULL_SHARD",
            "meta_tensors": ["a.weight", "b.weight", "c.weight", "d.weight"]}
    sharding = judge_runs(_run(fact), None, 3, activation_checkpointing=False)[2]
    assert sharding.ok is False
    assert sharding.detail.endswith("; still on the meta device after init: a.weight, b.weight, c.weight")


def test_only_well_formed_local_run_lines_are_kept():
    run = RunRecord(exit_code=0, wall_s=1.0)
    assert run.add_line(MARK + "{not json") is False and run.add_line("step 1 loss 2.0") is False
    assert run.add_line(MARK + json.dumps({"check": "step", "step": 1, "loss": 2.5})) is True
    assert run.facts == [{"check": "step", "step": 1, "loss": 2.5}] and run.losses() == {1: 2.5}


def test_a_verdict_cannot_be_changed_after_it_is_made():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Check("loss falls", False, "x").ok = True  # type: ignore[misc]


def test_loss_falls_is_judged_on_the_first_batch_and_names_the_first_and_last_steps():
    steps = [{"check": "step", "step": s, "loss": loss} for s, loss in ((1, 5.5), (2, 5.9), (3, 5.2))]
    again = {"check": "loss_on_first_batch", "step": 1, "after": 5.4, "steps": 3}
    (falls,) = [c for c in judge_runs(_run(*steps, again), None, 3, activation_checkpointing=False)
                if c.name == "loss falls"]
    assert falls.ok is True
    assert falls.detail == ("on step 1's batch 5.5000 -> 5.4000 after 3 steps "
                            "(training loss 5.5000 at step 1, 5.2000 at step 3)")
    (same,) = [c for c in judge_runs(_run(*steps, {**again, "after": 5.5}), None, 3, activation_checkpointing=False)
               if c.name == "loss falls"]
    assert same.ok is False, "a loss that did not fall on the same batch fails, whatever later batches did"


@pytest.mark.parametrize("layers,units,checkpointed,ok", [
    (2, 2, {"LlamaDecoderLayer": 2}, True),
    (0, 0, {}, False),                        # a model with no decoder layer found: nothing was wrapped
    (2, 1, {"LlamaDecoderLayer": 2}, False),  # two layers in one FSDP unit
    (2, 2, {"LlamaDecoderLayer": 1}, False),  # one layer not checkpointed
])
def test_each_decoder_layer_must_be_its_own_unit_and_checkpointed(layers, units, checkpointed, ok):
    fact = {"check": "wrapping", "layers": layers, "fsdp_units": units, "checkpointed": checkpointed,
            "layer_class": "LlamaDecoderLayer"}
    (wrapping,) = [c for c in judge_runs(_run(fact), None, 3, activation_checkpointing=True)
                   if c.name == "every decoder layer is its own FSDP unit and is checkpointed"]
    assert wrapping.ok is ok


def _steps(*pairs):
    return [{"check": "step", "step": s, "loss": loss} for s, loss in pairs]


def test_a_first_run_killed_mid_save_is_compared_on_the_steps_both_runs_ran():
    """The first run was killed while saving step 4; the second resumed from step 2 and ran to 6: steps 3 and 4
    are compared, 5 and 6 (only the second ran them) are not, and the end-of-training checks are the second's."""
    first = _run(*_steps((1, 5.5), (2, 5.4), (3, 5.3), (4, 5.2)), {"check": "held", "step": 4, "pids": [1, 2]})
    first.killed = True
    second = _run({"check": "resumed", "step": 2, "kind": "async"}, *_steps((3, 5.3), (4, 5.2), (5, 5.1), (6, 5.0)),
                  {"check": "loss_on_first_batch", "step": 3, "after": 5.0, "steps": 4})
    checks = {c.name: c for c in judge_runs(first, second, 2, activation_checkpointing=False)}
    resumed = checks["training resumes from the checkpoint"]
    assert resumed.ok is True
    assert resumed.detail == ("the first run was killed while saving step 4 asynchronously; restarted from step 2 "
                              "(async checkpoint); steps 3-4 repeat the first run's losses bit for bit")
    assert checks["loss falls"].ok is True and "on step 3's batch 5.3000 -> 5.0000" in checks["loss falls"].detail
    differs = _run({"check": "resumed", "step": 2}, *_steps((3, 5.31), (4, 5.2)))
    assert judge_runs(first, differs, 2, activation_checkpointing=False)[-1].ok is False
    nothing_shared = _run({"check": "resumed", "step": 2}, *_steps((7, 5.0)))
    assert judge_runs(first, nothing_shared, 2, activation_checkpointing=False)[-1].ok is False
    whole = _run(*_steps((1, 5.5), (2, 5.4), (3, 5.3)))  # not killed: every step of the second run must match
    assert judge_runs(whole, _run({"check": "resumed", "step": 2}, *_steps((3, 5.3), (4, 5.2))), 2,
                      activation_checkpointing=False)[-1].ok is False


def test_an_async_round_trip_says_it_compared_the_state_the_save_began_with():
    fact = {"check": "checkpoint_round_trip", "step": 2, "equal": True, "tensors": 84, "folders": [], "kind": "async"}
    (trip,) = [c for c in judge_runs(_run(fact), None, 2, activation_checkpointing=False)
               if c.name == "checkpoint saved and loaded back bit for bit"]
    assert trip.ok is True and trip.detail.endswith("as they were when the asynchronous save began, after "
                                                    "perturbing and loading once training had gone on")
