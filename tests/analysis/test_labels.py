"""Short case labels: params' numbers rounded for display, distinct cases kept apart."""

import pytest

from kvstats.analysis.frame import label_digits, short_params


@pytest.mark.parametrize("params,digits,expected", [
    ("scale=0.9174935806310884", 4, "scale=0.9175"),
    ("energy='total',noise=0.0,rank=1,scale=1.2345678901234", 4,
     "energy='total',noise=0.0,rank=1,scale=1.235"),
    ("noise=0.1,rank=8", 4, "noise=0.1,rank=8"),                      # already short: untouched
    ("eps=1.2345678e-07,nu=3", 3, "eps=1.23e-07,nu=3"),
    ("scale=-12345.678", 2, "scale=-1.2e+04"),
    ("path='cap-0.123456789.npz@ab12cd34'", 4, "path='cap-0.123456789.npz@ab12cd34'"),  # quoted
    ("-", 4, "-"),
])
def test_short_params_rounds_only_long_numbers_outside_quotes(params, digits, expected):
    assert short_params(params, digits) == expected


def test_label_digits_adds_digits_until_the_cases_differ():
    assert label_digits(["scale=0.9174935806310884", "scale=0.917035188375112"]) == 4
    # 1.2345678 and 1.2349999 agree to 4 digits (1.235), not to 5 (1.2346, 1.235)
    assert label_digits(["scale=1.2345678", "scale=1.2349999", "scale=1.2345678"]) == 5
    # neighbours in the last printed digit: the first k at which they differ, and not before
    near = ["scale=0.9174935806310884", "scale=0.9174935806310885"]
    k = label_digits(near)
    assert 13 < k <= 17
    assert short_params(near[0], k) != short_params(near[1], k)
    assert short_params(near[0], k - 1) == short_params(near[1], k - 1)
    assert label_digits([]) == 4 and label_digits(["-"], digits=2) == 2


@pytest.mark.parametrize("call,exc,match", [
    (lambda: short_params(1.5), TypeError, "params must be a str"),
    (lambda: short_params("a=1.0", 0), ValueError, "digits must be"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
