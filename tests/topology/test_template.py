"""Templates from TOML files: a topology bound by exact version plus parameters."""

from __future__ import annotations

import pytest

from subnet.topology import PlanError, Template, compile_plan, load_spec, template_from_file


def write(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_template_from_file_compiles(tmp_path, vocab, fit):
    path = write(
        tmp_path, 'topology = "@beam/fedavg@1.0.0"\n[params]\nworkers = 2\ntarget_loss = 2.5\n'
    )
    template = template_from_file(path)
    assert template == Template(
        topology="@beam/fedavg@1.0.0", params={"workers": 2, "target_loss": 2.5}
    )
    spec = load_spec(template.topology)
    plan = compile_plan(spec, template, fit(spec, template.params), vocab)
    assert plan.slot("worker").count == (2, 2) and plan.stop["threshold"] == 2.5


def test_template_without_params(tmp_path):
    assert template_from_file(write(tmp_path, 'topology = "@beam/sweep@1.0.0"\n')).params == {}


@pytest.mark.parametrize(
    "text, reason, words",
    [
        ('topology = "@beam/fedavg"\n', "bad_reference", "exact topology reference"),
        ('topology = "@beam/fedavg@1.0.0"\nseed = 1\n', "bad_template", "seed"),
        ("[params]\nworkers = 2\n", "bad_template", "topology"),
        ('topology = "@beam/fedavg@1.0.0\n', "bad_template", "run.toml"),
        ('topology = "@beam/fedavg@1.0.0"\nparams = 3\n', "bad_template", "params"),
    ],
)
def test_bad_template_files(tmp_path, text, reason, words):
    with pytest.raises(PlanError) as error:
        template_from_file(write(tmp_path, text))
    assert error.value.reason == reason and words in str(error.value)
    assert "\n" not in str(error.value)


def test_missing_template_file(tmp_path):
    with pytest.raises(PlanError, match="not found") as error:
        template_from_file(tmp_path / "none.toml")
    assert error.value.reason == "bad_template"
