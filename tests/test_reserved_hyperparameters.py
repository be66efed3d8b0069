"""A spec hyperparameter named like one the SageMaker SDK adds (sagemaker_program, sagemaker_submit_directory,
sagemaker_job_name, sagemaker_region, ..., mp_parameters) would be replaced by the SDK's own value without a word:
it is refused where it is written, for both backends, and the schema says so to editors.

The names the SDK adds: launcher/plan/request.py (estimator_request, model_trainer_request); the SageMaker
training toolkit reads every `sagemaker_`-prefixed hyperparameter as its own, not the script's
(https://github.com/aws/sagemaker-training-toolkit/blob/master/src/sagemaker_training/params.py).
"""
import json

import pytest

from launcher.core.errors import SpecError
from launcher.core.sdk import BackendKind
from launcher.plan.request import predict_request
from launcher.spec import load_spec
from launcher.spec.schema import schema
from tests.conftest import JOBS, MINIMAL

SDK_NAMES = ["sagemaker_program", "sagemaker_submit_directory", "sagemaker_job_name", "sagemaker_region",
             "sagemaker_container_log_level", "sagemaker_instance_type", "sagemaker_torch_distributed_enabled",
             "sagemaker_distributed_dataparallel_enabled", "mp_parameters"]


def refused(*overrides) -> SpecError:
    with pytest.raises(SpecError) as err:
        load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides], env={})
    assert err.value.exit_code == 2
    return err.value


@pytest.mark.parametrize("name", SDK_NAMES + ["SageMaker_Program", "sagemaker_anything_new"])
def test_a_hyperparameter_the_sdk_sets_is_refused_naming_it(name):
    err = refused(f"hyperparameters.{name}=train.py")
    (problem,) = err.problems
    assert problem.path == f"hyperparameters.{name}"
    assert "the SageMaker SDK sets" in problem.message and "rename it" in problem.message


def test_the_predicted_request_of_both_backends_adds_only_names_the_spec_may_not_use():
    """The refused names cover every hyperparameter either backend adds beside the spec's."""
    import dataclasses

    from launcher.core.sdk import choose_backend
    from launcher.plan.build import build_plan
    from launcher.spec.models import reserved_hyperparameter

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good"], env={}))
    for kind in (BackendKind.ESTIMATOR, BackendKind.MODEL_TRAINER):
        chosen = dataclasses.replace(plan, backend=dataclasses.replace(choose_backend("auto"), kind=kind))
        added = set(predict_request(chosen, "s3://b/k", "arn:aws:iam::1:role/R")["HyperParameters"])
        added -= set(plan.spec.hyperparameters)
        assert added and all(reserved_hyperparameter(name) for name in added), kind


def test_a_reserved_name_in_a_spec_file_is_refused_at_its_line(write_spec):
    path = write_spec(f"extends: {JOBS / 'llama7b.yaml'}\nhyperparameters:\n  lr_scale: 2\n  sagemaker_program: x.py\n")
    with pytest.raises(SpecError) as err:
        load_spec(path, ["role=Good"], env={})
    (problem,) = err.value.problems
    assert problem.path == "hyperparameters.sagemaker_program" and problem.line == 4


def test_names_that_only_look_alike_are_the_scripts_own():
    loaded = load_spec(JOBS / "llama7b.yaml", ["role=Good", "hyperparameters={my_sagemaker_flag: 1, mp_params: 2, "
                                               "sagemaker: 3}"], env={})
    assert loaded.spec.hyperparameters == {"my_sagemaker_flag": 1, "mp_params": 2, "sagemaker": 3}


def test_the_schema_refuses_the_names_too():
    import jsonschema
    import yaml
    doc = yaml.safe_load(MINIMAL)
    validator = jsonschema.Draft202012Validator(schema())
    assert not list(validator.iter_errors({**doc, "hyperparameters": {"lr_scale": 2}}))
    for name in ("sagemaker_program", "SAGEMAKER_REGION", "mp_parameters"):
        assert list(validator.iter_errors({**doc, "hyperparameters": {name: 2}})), name


def test_validate_says_it_in_one_line_with_exit_2(run_cli):
    r = run_cli("validate", str(JOBS / "llama7b.yaml"), "--set", "hyperparameters.sagemaker_region=us-east-1",
                "--output", "json")
    assert r.code == 2 and "Traceback" not in r.err
    assert "sagemaker_region" in r.out + r.err and json.loads(r.out)
