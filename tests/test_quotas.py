"""Before anything is created: the training-instance quota against what runs now, and the Price List's figures.

In-process moto with the emulator's Service Quotas and pricing (moto has neither); the end-to-end runs of the
real CLI are in test_quotas_e2e.py."""
import json

import pytest

import emulator
from emulator import pricing as fake_prices
from emulator import quotas as fake_quotas
from launcher import api
from launcher.catalog.prices import hourly_price
from launcher.core.aws import Clients
from launcher.spec import load_spec
from launcher.submission.create import submit as submit_plan
from launcher.submission.pricing import brief, fetch_prices, filters, price_of
from launcher.submission.quotas import NotOffered, OverQuota, QuotaVerdict, check_quota, quota_name
from tests.conftest import JOBS, refusing


def plan_of(*overrides, region="us-west-2"):
    return api.build_plan(load_spec(JOBS / "llama7b.yaml", ["role=Good", *overrides]), region=region)


def start_job(sm, name, itype="ml.p4d.24xlarge", count=2):
    emulator.add_job(emulator.EmulatedJob(name, hosts=count, instance_type=itype, training=3600), sm)


# -- the quota ------------------------------------------------------------------------------------------------

def test_the_default_quota_holds_and_the_check_names_its_source(moto_world):
    check = check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 4, "us-west-2", spot=False)
    assert check.verdict is QuotaVerdict.OK and check.quota == fake_quotas.DEFAULT
    assert check.quota_source == "default" and check.in_use == 0 and check.quota_code.startswith("L-")


def test_running_jobs_of_the_type_count_and_others_do_not(moto_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 6)
    sm = moto_world.sagemaker
    emulator.add_job(emulator.EmulatedJob("done", hosts=4, training=0.0, starting=0.0, downloading=0.0,
                                          uploading=0.0), sm)  # ended: it holds nothing
    start_job(sm, "run-a", count=2)
    start_job(sm, "run-b", count=3)
    start_job(sm, "run-p5", itype="ml.p5.48xlarge", count=4)
    check = check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 2, "us-west-2", spot=False)
    assert (check.verdict, check.quota_source, check.in_use) == (QuotaVerdict.OVER, "applied", 5)
    assert sorted(check.in_use_jobs) == ["run-a", "run-b"] and check.waitable
    text = check.message()
    for part in ("'ml.p4d.24xlarge for training job usage'", "is 6", "5 in use by 2 running job(s)",
                 "this job needs 2: 7 > 6", "Service Quotas console", "request-service-quota-increase",
                 f"--quota-code {check.quota_code}", "--desired-value 7", "--max-concurrent"):
        assert part in text, (part, text)
    assert (f"Service Quotas console (https://us-west-2.console.aws.amazon.com/servicequotas/home/services/sagemaker/"
            f"quotas/{check.quota_code})") in text
    assert check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 1, "us-west-2", spot=False).verdict \
        is QuotaVerdict.OK




def test_a_quota_whose_use_cannot_be_read_is_cannot_tell_with_the_quota(moto_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 6)
    clients = refusing(Clients(region="us-west-2"), "sagemaker.Search")
    check = check_quota(clients, "ml.p4d.24xlarge", 2, "us-west-2", spot=False)
    assert (check.verdict, check.quota, check.quota_source) == (QuotaVerdict.UNKNOWN, 6, "applied")
    assert check.note.startswith("quota: 6, but what is in use cannot be told (")


def test_service_quotas_that_list_nothing_for_sagemaker_is_cannot_tell(moto_world):
    from types import SimpleNamespace

    clients = Clients(region="us-west-2")
    answer = (SimpleNamespace(status_code=200, headers={}), {"Quotas": []})  # an empty page, not sent to moto
    for operation in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
        clients.session.events.register(f"before-call.service-quotas.{operation}", lambda **_kw: answer)
    check = check_quota(clients, "ml.p4d.24xlarge", 2, "us-west-2", spot=False)
    assert check.verdict is QuotaVerdict.UNKNOWN
    assert "Service Quotas listed no SageMaker quota" in check.note


def test_a_heterogeneous_job_holds_its_groups_of_the_type(moto_world):
    from launcher.submission.quotas import _count

    groups = {"InstanceGroups": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
                                 {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 3},
                                 {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]}
    assert (_count(groups, "ml.p4d.24xlarge"), _count(groups, "ml.p5.48xlarge"), _count(groups, "ml.g5.xlarge")) == (
        3, 3, 0)


def test_a_refusal_without_the_numbers_stays_as_it_is():
    from launcher.core.aws import AwsError
    from launcher.submission.quotas import from_refusal

    err = AwsError("ResourceLimitExceeded: too many training jobs")
    assert from_refusal(err, "us-west-2") is err


def test_the_api_checks_the_quota_in_the_plans_region_with_clients_it_makes(moto_world):
    """Without clients, check_quota asks the plan's region: its running jobs and its quota, not another's."""
    fake_quotas.set_quota("ml.p4d.24xlarge", 2, region="eu-west-1")
    start_job(Clients(region="eu-west-1").sagemaker, "eu-run", count=2)
    start_job(moto_world.sagemaker, "us-run", count=2)
    check = api.check_quota(plan_of(region="eu-west-1"))
    assert isinstance(check, api.QuotaCheck) and check.verdict is QuotaVerdict.OVER
    assert (check.quota, check.quota_source, check.in_use, check.in_use_jobs) == (2, "applied", 2, ("eu-run",))
    assert "this job needs 1: 3 > 2" in check.message()
    here = api.check_quota(plan_of())
    assert (here.verdict, here.quota_source, here.in_use_jobs) == (QuotaVerdict.OK, "default", ("us-run",))
    with pytest.raises(api.UsageError, match="the plan is for eu-west-1 but the clients are for us-west-2"):
        api.check_quota(plan_of(region="eu-west-1"), clients=Clients(region="us-west-2"))


def test_a_job_bigger_than_the_quota_cannot_wait_for_it(moto_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 4)
    check = check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 8, "us-west-2", spot=False)
    assert check.verdict is QuotaVerdict.OVER and not check.waitable and "--max-concurrent" not in check.message()


def test_spot_has_its_own_quota(moto_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 0, spot=True)
    assert quota_name("ml.p4d.24xlarge", spot=True) == "ml.p4d.24xlarge for spot training job usage"
    spot = check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 1, "us-west-2", spot=True)
    assert spot.verdict is QuotaVerdict.OVER and "spot training job usage" in spot.message()
    assert check_quota(Clients(region="us-west-2"), "ml.p4d.24xlarge", 1, "us-west-2", spot=False).verdict \
        is QuotaVerdict.OK


def test_quotas_are_read_across_pages(moto_world, monkeypatch):
    """The applied value sits on a later page of ListServiceQuotas: paging must reach it."""
    for itype in fake_quotas.TYPES:
        fake_quotas.set_quota(itype, 100)
    fake_quotas.set_quota("ml.p5en.48xlarge", 3, spot=True)
    seen = []
    clients = Clients(region="us-west-2")
    clients.session.events.register("provide-client-params.service-quotas.ListServiceQuotas",
                                    lambda params, **_: params.update(MaxResults=2) or seen.append(params))
    check = check_quota(clients, "ml.p5en.48xlarge", 4, "us-west-2", spot=True)
    assert len(seen) > 2 and check.quota == 3 and check.quota_source == "applied"


def test_an_instance_type_not_offered_in_the_region_is_its_own_error(moto_world):
    fake_quotas.not_offered("ml.p5.48xlarge", "us-west-2")
    plan = plan_of("cluster.instance_type=ml.p5.48xlarge", "framework.pytorch_version='2.5.1'")
    with pytest.raises(NotOffered) as err:
        submit_plan(plan, Clients(region="us-west-2"), dry_run=True)
    assert err.value.exit_code == 3
    assert "does not offer ml.p5.48xlarge for training in us-west-2" in str(err.value)
    assert "quota increase" not in str(err.value) and "request-service-quota-increase" not in str(err.value)


def test_submit_refuses_over_quota_with_exit_3_and_creates_nothing(moto_world):
    fake_quotas.set_quota("ml.p4d.24xlarge", 2)
    start_job(moto_world.sagemaker, "holder", count=2)
    for dry_run in (True, False):
        with pytest.raises(OverQuota) as err:
            submit_plan(plan_of(), Clients(region="us-west-2"), dry_run=dry_run)
        assert err.value.exit_code == 3 and "2 in use by 1 running job(s) (holder)" in str(err.value)
    names = [j["TrainingJobName"] for j in moto_world.sagemaker.list_training_jobs()["TrainingJobSummaries"]]
    assert names == ["holder"]
    s3 = moto_world.session.client("s3")
    assert "Contents" not in s3.list_objects_v2(Bucket="my-smp-bucket")


def test_the_emulator_refuses_a_create_over_quota_as_sagemaker_does(moto_world):
    """What SageMaker itself answers when the check was skipped or raced: ResourceLimitExceeded, exit 3."""
    from botocore.exceptions import ClientError

    fake_quotas.set_quota("ml.p4d.24xlarge", 1)
    with pytest.raises(ClientError) as err:
        start_job(moto_world.sagemaker, "too-big", count=2)
    assert err.value.response["Error"]["Code"] == "ResourceLimitExceeded"
    assert "'ml.p4d.24xlarge for training job usage' is 1 Instances" in str(err.value)


def test_submit_json_carries_the_quota_and_the_prices(moto_world):
    fake_prices.set_price("ml.p4d.24xlarge", "us-west-2", 37.688)
    result = submit_plan(plan_of(), Clients(region="us-west-2"), dry_run=True)
    data = result.to_dict()
    assert data["quota"]["verdict"] == "ok" and data["quota"]["needed"] == 1 and data["quota"]["in_use"] == 0
    assert data["prices"]["prices"]["ml.p4d.24xlarge|us-west-2|on-demand"]["usd_per_hour"] == 37.688
    assert data["prices"]["missing"] == ["ml.p4d.24xlarge|us-west-2|spot"] and not result.warnings
    assert {"service-quotas.ListServiceQuotas", "sagemaker.Search", "pricing.GetProducts"} \
        <= set(result.aws_calls)


def test_without_quotas_or_prices_submit_goes_on_with_one_note_each(moto_world):
    fake_quotas.plain(True)
    fake_prices.plain(True)
    result = submit_plan(plan_of(), Clients(region="us-west-2", max_attempts=0), dry_run=True)
    assert result.quota.verdict is QuotaVerdict.UNKNOWN
    quota_notes = [w for w in result.warnings if w.startswith("quota:")]
    price_notes = [w for w in result.warnings if w.startswith("prices:")]
    assert len(quota_notes) == 1 and "cannot tell" in quota_notes[0]
    assert len(price_notes) == 1 and "cannot tell" in price_notes[0]
    assert "<" not in "".join(result.warnings)


# -- prices ---------------------------------------------------------------------------------------------------

def test_a_fetched_price_is_cached_and_later_plans_read_it_with_its_date(moto_world, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    fake_prices.set_price("ml.p4de.24xlarge", "us-west-2", 40.5)
    fake_prices.set_price("ml.p4de.24xlarge", "us-west-2", 14.25, spot=True)
    assert hourly_price("ml.p4de.24xlarge", "us-west-2", spot=False, env=env) is None
    got = fetch_prices(Clients(region="us-west-2"), ["ml.p4de.24xlarge"], "us-west-2", env=env)
    assert not got.notes and not got.missing and got.cache
    on_demand = hourly_price("ml.p4de.24xlarge", "us-west-2", spot=False, env=env)
    spot = hourly_price("ml.p4de.24xlarge", "us-west-2", spot=True, env=env)
    assert (on_demand.usd_per_hour, spot.usd_per_hour) == (40.5, 14.25)
    assert on_demand.source.startswith("AWS Price List API") and len(on_demand.date) == 10


def test_a_price_cache_that_cannot_be_written_is_a_note_and_the_figures_still_come_back(moto_world, tmp_path):
    (tmp_path / "state").write_text("a file where the state folder would be")
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    fake_prices.set_price("ml.p4de.24xlarge", "us-west-2", 40.5)
    got = fetch_prices(Clients(region="us-west-2"), ["ml.p4de.24xlarge"], "us-west-2", env=env)
    assert got.cache is None and got.prices["ml.p4de.24xlarge|us-west-2|on-demand"].usd_per_hour == 40.5
    assert got.notes == ("prices: fetched, but the cache could not be written (Not a directory)",)


def test_the_price_list_client_is_in_a_price_list_region(moto_world):
    from launcher.core.aws import pricing_region

    assert Clients(region="eu-west-1").pricing.meta.region_name == "eu-central-1"
    assert Clients(region="ap-northeast-1").pricing.meta.region_name == "ap-south-1"
    assert Clients(region="us-west-2").pricing.meta.region_name == "us-east-1"
    assert pricing_region(None) == "us-east-1"


def test_get_products_filters_name_the_price_lists_attributes():
    assert {f["Field"]: f["Value"] for f in filters("ml.p5.48xlarge", "us-east-1", spot=True)} == {
        "productFamily": "ML Instance", "regionCode": "us-east-1", "instanceName": "ml.p5.48xlarge",
        "platoinstancetype": "SpotTraining"}
    assert all(f["Type"] == "TERM_MATCH" for f in filters("ml.p5.48xlarge", "us-east-1", spot=False))


def _item(name, usd, unit="Hrs", usage="USE1-Train:x"):
    return json.dumps({"product": {"productFamily": "ML Instance", "attributes": {
        "instanceName": name, "usagetype": usage}}, "terms": {"OnDemand": {"A.B": {
            "effectiveDate": "2026-10-01T00:00:00Z", "priceDimensions": {"A.B.C": {
                "unit": unit, "pricePerUnit": {"USD": usd}}}}}}})


def test_price_of_reads_price_list_strings_and_ignores_what_is_not_an_hourly_figure():
    items = [_item("ml.p4d.24xlarge", "37.6880000000"), _item("ml.p4d.24xlarge", "0.1400000000", unit="GB-Mo"),
             _item("ml.p5.48xlarge", "99"), "{not json", _item("ml.p4d.24xlarge", "free")]
    price = price_of(items, "ml.p4d.24xlarge", today="2026-12-02")
    assert price.usd_per_hour == 37.688 and price.date == "2026-12-02"
    assert price.source.endswith("(USE1-Train:x, effective 2026-10-01)")  # the date of its effectiveDate
    hostile = json.loads(_item("ml.p4d.24xlarge", "1"))
    hostile["terms"]["OnDemand"]["A.B"]["effectiveDate"] = "\x1b[2J" * 4  # escapes would make it 4 times as long
    effective = price_of([json.dumps(hostile)], "ml.p4d.24xlarge", today="x").source.split("effective ", 1)[1]
    assert "\x1b" not in effective and len(effective[:-1]) == 10 and effective.endswith("…)")
    assert price_of([_item("ml.p4d.24xlarge", "0")], "ml.p4d.24xlarge", today="x") is None
    assert price_of([], "ml.p4d.24xlarge", today="x") is None


def test_brief_names_an_html_page_instead_of_quoting_it():
    assert brief("GetProducts failed: 500: <!doctype html><html>boom</html>") == \
        "GetProducts failed: 500 (an HTML error page)"
    assert len(brief("x" * 900)) <= 203


def test_sagemakers_own_refusal_becomes_a_check_a_queue_can_wait_on(moto_world):
    """Two submits at once: the quota check passed for both, then SageMaker counted the other job first."""
    from botocore.exceptions import ClientError

    def start(*_args):
        raise ClientError({"Error": {"Code": "ResourceLimitExceeded", "Message": (
            "The account-level service limit 'ml.p4d.24xlarge for training job usage' is 4 Instances, with current "
            "utilization of 3 Instances and a request delta of 2 Instances. Please use AWS Service Quotas to "
            "request an increase for this quota.")}}, "CreateTrainingJob")

    with pytest.raises(OverQuota) as err:
        submit_plan(plan_of("cluster.instance_count=2"), Clients(region="us-west-2"), start=start)
    check = err.value.check
    assert (check.quota, check.in_use, check.needed, check.waitable) == (4, 3, 2, True)
    assert err.value.exit_code == 3 and "3 in use, and this job needs 2: 5 > 4" in str(err.value)


def test_a_figure_fetched_today_is_not_asked_again_unless_forced(moto_world, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    fake_prices.set_price("ml.p5.48xlarge", "us-west-2", 55.0)
    fake_prices.set_price("ml.p5.48xlarge", "us-west-2", 20.0, spot=True)
    clients = Clients(region="us-west-2")
    fetch_prices(clients, ["ml.p5.48xlarge"], "us-west-2", env=env)
    asked = fake_prices.calls()
    again = fetch_prices(clients, ["ml.p5.48xlarge"], "us-west-2", env=env)
    assert fake_prices.calls() == asked and again.prices["ml.p5.48xlarge|us-west-2|on-demand"].usd_per_hour == 55.0
    fake_prices.set_price("ml.p5.48xlarge", "us-west-2", 50.0)
    forced = fetch_prices(clients, ["ml.p5.48xlarge"], "us-west-2", env=env, force=True)
    assert fake_prices.calls() == asked + 2 and forced.prices["ml.p5.48xlarge|us-west-2|on-demand"].usd_per_hour == 50.0
    assert hourly_price("ml.p5.48xlarge", "us-west-2", spot=False, env=env).usd_per_hour == 50.0


def test_a_quota_code_that_is_not_text_is_not_shown():
    from launcher.submission.quotas import _code

    assert _code({"QuotaCode": "L-1216C47A"}) == "L-1216C47A"
    assert _code({"QuotaCode": 5}) is None and _code({"QuotaCode": ""}) is None and _code({}) is None
