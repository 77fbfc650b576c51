"""The Methods' host line names the CPUs the sweep's process could use where fewer than the
machine's (manifest host.cpus_usable: an affinity or a cgroup), and only then."""

from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result


def test_host_line_names_usable_cpus_only_where_fewer(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=20, seed=1)
    for usable, expected in ((1, "2 CPUs (1 usable);"), (2, "2 CPUs;")):
        res = sweep_result(f)
        res.manifest["host"] = {"platform": "test", "cpus": 2, "cpus_usable": usable}
        md = hypothesis_report(res, tmp_path / str(usable), figures=False,
                               energy_resamples=19).files["markdown"].read_text()
        assert f"Host: test, {expected}" in md
