"""``rmq-adapter spark index``: listed beside the other jobs, with their options, and its
config (every real topic unless told, a 5 s trigger)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from adapter.ops.cli import main as cli
from adapter.spark.config import Job, SparkJobConfig

pytestmark = pytest.mark.timeout(30)


def test_the_index_job_is_listed_with_the_jobs_options() -> None:
    listed = CliRunner().invoke(cli, ["spark", "--help"])
    assert "index" in listed.output
    shown = CliRunner().invoke(cli, ["spark", "index", "--help"])
    assert shown.exit_code == 0, shown.output
    for option in ("--bootstrap", "--table", "--topic", "--available-now", "--checkpoint"):
        assert option in shown.output


def test_the_index_job_reads_every_real_topic_unless_told() -> None:
    config = SparkJobConfig.from_env(Job.INDEX, environ={}, bootstrap="127.0.0.1:9092")
    assert config.topics == ()
    assert config.trigger_ms == 5000
    assert str(config.table) == ".rmq-spark/index/table"
