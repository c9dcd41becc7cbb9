"""`vgpu demo --device-list-strategy` (docs/cdi.md §5): validated like the plugin's setting."""

from __future__ import annotations

import pytest

from vgpu.sim.demo.options import DemoConfigError, build_options


def test_default_is_envvar_and_lists_are_normalised():
    assert build_options().device_list_strategy == "envvar" and not build_options().uses_cdi
    o = build_options(device_list_strategy=" envvar , cdi-cri,envvar")
    assert o.device_list_strategy == "envvar,cdi-cri" and o.uses_cdi


def test_an_unknown_strategy_names_the_option():
    with pytest.raises(DemoConfigError, match="--device-list-strategy: device-list strategy 'cdi'"):
        build_options(device_list_strategy="cdi")
