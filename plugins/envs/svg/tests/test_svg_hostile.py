"""Malformed and hostile SVG: every case gives a clear message, never a hang, a crash or a leak.

Each attack is tried twice: through the env (the static checks answer first, with a precise reason)
and straight at the capped renderer child with the checks skipped (what holds if a check is missed).
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
from vista_plugin_svg.render import (
    RenderLimits,
    RenderPool,
    RenderWorker,
    close_shared_pools,
    render_svg,
    render_unchecked,
    shared_pool,
)
from vista_plugin_svg.safety import SvgLimits, UnsafeSvg, check_svg

import vista_rl

ENV_ID = "svg/reconstruct-v0"
NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'

BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE svg [\n<!ENTITY a "lol">\n'
    + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">\n' for i in range(9))
    + f']>\n<svg {NS} viewBox="0 0 10 10"><text y="5">&j;</text></svg>'
)
XXE = (f'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
       f'<svg {NS}><text y="5">&x;</text></svg>')
FILE_IMAGE = f'<svg {NS} viewBox="0 0 10 10"><image href="file:///etc/passwd" width="10" height="10"/></svg>'
HTTP_IMAGE = f'<svg {NS} viewBox="0 0 10 10"><image xlink:href="http://127.0.0.1:9/x.png" width="10" height="10"/></svg>'
HTTP_USE = f'<svg {NS} viewBox="0 0 10 10"><use href="http://127.0.0.1:9/sprite.svg#a"/></svg>'
STYLE_URL = (f'<svg {NS} viewBox="0 0 10 10"><style>rect {{ fill: url("file:///etc/passwd#x") }}</style>'
             '<rect width="10" height="10"/></svg>')
STYLE_IMPORT = f'<svg {NS}><style>@import url(http://127.0.0.1:9/a.css);</style></svg>'
FILL_URL = f'<svg {NS}><rect width="10" height="10" fill="url(http://127.0.0.1:9/p.svg#g)"/></svg>'
DEEP = f'<svg {NS}>' + "<g>" * 5_000 + "</g>" * 5_000 + "</svg>"
HUGE_DECLARED = f'<svg {NS} width="1e9" height="1e9"><rect width="1e9" height="1e9" fill="red"/></svg>'
HUGE_VIEWBOX = f'<svg {NS} viewBox="0 0 1e12 1e12"><rect width="10" height="10"/></svg>'
SCRIPT = f'<svg {NS}><script>alert(1)</script></svg>'
MANY_ELEMENTS = f'<svg {NS}>' + '<g/>' * 6_000 + "</svg>"
USE_BOMB = (f'<svg {NS} viewBox="0 0 100 100"><defs><circle id="l0" r="1"/>'
            + "".join(f'<g id="l{i}">' + f'<use href="#l{i - 1}"/>' * 10 + "</g>" for i in range(1, 8))
            + '</defs><use href="#l7"/></svg>')  # 10^7 circles from 1.4 kB
USE_CYCLE = f'<svg {NS}><g id="a"><use xlink:href="#b"/></g><g id="b"><use href="#a"/></g></svg>'
SIMPLE = f'<svg {NS} viewBox="0 0 10 10"><rect x="2" y="2" width="6" height="6" fill="#0000ff"/></svg>'

CASES = {
    "billion-laughs": (BILLION_LAUGHS, "entity"),
    "external-entity": (XXE, "entity"),
    "file-image": (FILE_IMAGE, "outside the document"),
    "http-image": (HTTP_IMAGE, "outside the document"),
    "http-use": (HTTP_USE, "outside the document"),
    "style-url": (STYLE_URL, "outside the document"),
    "style-import": (STYLE_IMPORT, "@import"),
    "fill-url": (FILL_URL, "outside the document"),
    "deep-nesting": (DEEP, "nested more than"),
    "use-amplification": (USE_BOMB, "expand the SVG to more than 20,000 elements"),
    "use-cycle": (USE_CYCLE, "cycle"),
    "huge-declared-size": (HUGE_DECLARED, "larger than"),
    "huge-viewbox": (HUGE_VIEWBOX, "viewBox"),
    "script": (SCRIPT, "<script> is not allowed"),
    "many-elements": (MANY_ELEMENTS, "more than 5,000 elements"),
    "too-long": ("<svg>" + " " * 200_000 + "</svg>", "characters"),
    "not-xml": (f"<svg {NS}><rect width='10'></svg>", "not well-formed"),
    "wrong-root": (f"<svgx {NS}/>", "No <svg>"),
}


@pytest.fixture(scope="module")
def env():
    environment = vista_rl.make_env(ENV_ID, image_size=32)
    yield environment
    environment.close()


@pytest.mark.parametrize("svg,reason", CASES.values(), ids=CASES.keys())
def test_env_turns_hostile_svg_into_a_clear_observation(env, svg, reason):
    env.reset(seed=0)
    result = env.step(f"<think>try</think><answer>{svg}</answer>")
    assert result.reward == 0.0 and not result.info["action_valid"]
    assert result.observation.images == []  # nothing rendered, nothing shown
    assert reason in result.observation.text, result.observation.text
    assert reason in result.info["render_error"]
    assert not result.done  # the model gets its second turn to fix it


@pytest.mark.parametrize("name", ["file-image", "http-image", "http-use", "style-url", "fill-url"])
def test_static_check_names_the_reference(name):
    with pytest.raises(UnsafeSvg, match="only internal '#id' references"):
        check_svg(CASES[name][0])


def test_internal_references_and_gradients_are_allowed():
    svg = (f'<svg {NS} viewBox="0 0 10 10"><defs><linearGradient id="g"><stop offset="0" stop-color="red"/>'
           '<stop offset="1" stop-color="blue"/></linearGradient><rect id="r" width="4" height="4"/></defs>'
           '<rect width="10" height="10" fill="url(#g)"/><use href="#r" x="5"/></svg>')
    check_svg(svg)
    result = render_svg(svg, 20, 20)
    assert result.ok and result.image.getpixel((1, 10))[0] > result.image.getpixel((18, 10))[0]


# ------------------------------------------------------------ the renderer child with the checks skipped
def test_child_refuses_entity_expansion_without_the_static_check():
    result = render_unchecked(BILLION_LAUGHS, 32, 32)
    assert not result.ok and "Entit" in result.error  # defusedxml inside cairosvg, run in the child


def test_child_refuses_external_entities_without_the_static_check():
    result = render_unchecked(XXE, 32, 32)
    assert not result.ok and "passwd" not in (result.error or "").replace("file:///etc/passwd", "")


@pytest.mark.parametrize("svg", [FILE_IMAGE, HTTP_IMAGE], ids=["file", "http"])
def test_child_fetches_nothing_without_the_static_check(svg):
    result = render_unchecked(svg, 32, 32)
    assert not result.ok and "external resource refused" in result.error


def test_child_survives_deep_nesting_without_the_static_check():
    result = render_unchecked(DEEP, 32, 32)
    assert not result.ok and "nested too deeply" in result.error


def test_use_amplification_hits_the_cpu_cap_without_the_static_check():
    worker = RenderWorker(RenderLimits(cpu_s=1, timeout_s=120))
    try:
        result = worker.render(USE_BOMB, 32, 32)
        assert not result.ok and result.stage == "limit" and "CPU, memory or output limits" in result.error
        assert worker.render(SIMPLE, 16, 16).ok and worker.starts == 2  # a fresh worker takes over
    finally:
        worker.close()


def test_many_uses_of_one_group_are_counted_once_per_use_not_per_path():
    fan = (f'<svg {NS}><defs><rect id="r" width="1" height="1"/></defs>' + '<use href="#r"/>' * 300 + "</svg>")
    check_svg(fan)  # 601 elements drawn: fine
    chain = f'<svg {NS}><rect id="u0" width="1" height="1"/>' + "".join(
        f'<use id="u{i}" href="#u{i - 1}"/>' for i in range(1, 3000)) + "</svg>"
    with pytest.raises(UnsafeSvg, match="expand the SVG"):  # 4.5 million drawn, and no recursion error
        check_svg(chain)


def test_huge_declared_size_renders_at_the_fixed_output_size():
    result = render_unchecked(HUGE_DECLARED, 24, 24)
    assert result.ok and result.image.size == (24, 24)


def test_huge_output_surface_hits_the_memory_cap_not_the_host():
    result = render_unchecked(SIMPLE, 20_000, 20_000, limits=RenderLimits(memory_mb=512))  # a 1.6 GB surface
    assert not result.ok and result.stage == "limit" and "more memory than allowed" in result.error


def test_slow_render_is_stopped_by_the_wall_clock_timeout():
    result = render_unchecked(SIMPLE, 32, 32, limits=RenderLimits(timeout_s=0.01))
    assert not result.ok and result.stage == "limit" and "longer than" in result.error


def test_limits_are_configurable_from_the_env():
    environment = vista_rl.make_env(ENV_ID, image_size=32, max_svg_chars=300, max_depth=3)
    environment.reset(seed=0)
    nested = f'<svg {NS}><g><g><g><rect width="1" height="1"/></g></g></g></svg>'
    result = environment.step(f"<think>x</think><answer>{nested}</answer>")
    assert "nested more than 3 deep" in result.observation.text
    assert SvgLimits(max_chars=300, max_depth=3) == environment.svg_limits


# ------------------------------------------------------------------------- the long-lived worker
def test_worker_recovers_after_a_cap_kills_it_and_closes_cleanly():
    worker = RenderWorker(RenderLimits(memory_mb=512))
    try:
        assert worker.render(SIMPLE, 16, 16).ok and worker.starts == 1
        assert worker.render(SIMPLE, 16, 16).ok and worker.starts == 1  # reused, not restarted
        killed = worker.render(SIMPLE, 20_000, 20_000)
        assert not killed.ok and killed.stage == "limit" and "more memory" in killed.error
        for svg in (BILLION_LAUGHS, FILE_IMAGE, DEEP):
            assert not worker.render(svg, 16, 16).ok
        again = worker.render(SIMPLE, 16, 16)
        assert again.ok and again.image.getpixel((8, 8)) == (0, 0, 255) and worker.starts == 2
        process = worker._process
    finally:
        worker.close()
        worker.close()
    assert process is not None and process.poll() is not None  # no renderer left behind


def test_worker_timeout_kills_and_restarts():
    worker = RenderWorker(RenderLimits(timeout_s=0.01))
    try:
        result = worker.render(SIMPLE, 16, 16)  # the worker cannot even start in 10 ms
        assert not result.ok and result.stage == "limit" and "longer than" in result.error
        assert worker._process is None
    finally:
        worker.close()


def test_env_close_stops_its_worker():
    environment = vista_rl.make_env(ENV_ID, image_size=16, renderer="worker")
    environment.reset(seed=0)
    environment.step(environment.oracle_response())  # the target may come from the cache; an answer never does
    process = environment._worker._process
    assert process is not None and process.poll() is None
    environment.close()
    assert process.poll() is not None and environment._worker is None


def test_shared_pool_serves_many_envs_and_concurrent_renders_with_a_bounded_number_of_workers():
    pool = RenderPool(RenderLimits(), size=2)
    try:
        with ThreadPoolExecutor(max_workers=6) as threads:
            results = list(threads.map(lambda _: pool.render(SIMPLE, 16, 16), range(12)))
        assert all(result.ok for result in results)
        assert len(pool._workers) <= 2 and pool.starts == len(pool._workers)
        killed = pool.render(SIMPLE, 20_000, 20_000)  # a cap trips in one worker ...
        assert killed.stage == "limit" and pool.render(SIMPLE, 16, 16).ok  # ... and the pool goes on
        processes = [worker._process for worker in pool._workers if worker._process is not None]
    finally:
        pool.close()
    assert processes and all(process.poll() is not None for process in processes)


def test_envs_share_the_process_pool():
    first = vista_rl.make_env(ENV_ID, image_size=16, render_workers=1)
    second = vista_rl.make_env(ENV_ID, image_size=16, render_workers=1)
    for environment in (first, second):
        environment.reset(seed=1)
        assert environment.step(environment.oracle_response()).info["action_valid"]
        environment.close()
    pool = shared_pool(first.render_limits, 1)
    assert len(pool._workers) == 1 and pool.starts == 1  # one renderer process served both envs
    close_shared_pools()
    assert pool._workers == []


def test_mutated_svg_never_raises_and_always_explains():
    """Seeded mutations of a real target (cut short, bytes flipped, tags spliced in): each turn either
    renders or says why, and the observation is always well formed."""
    import random

    from vista_plugin_svg.targets import synthetic_target

    rng = random.Random(0)
    environment = vista_rl.make_env(ENV_ID, image_size=24, max_turns=64)
    environment.reset(seed=0)
    base = synthetic_target(3, 3, 4).svg
    inserts = ["<", ">", "&", "&amp;", '"', "<!--", "]]>", "<g>", "</svg>", "\x00", "url(", "href=", "\ud800", "<image>"]
    rendered = refused = 0
    for _ in range(60):
        svg = base
        for _ in range(rng.randint(1, 3)):
            cut = rng.randrange(len(svg))
            svg = svg[:cut] + rng.choice(inserts) + svg[cut + rng.randint(0, 3):] if rng.random() < 0.8 else svg[:cut]
        result = environment.step(f"<think>x</think><answer>{svg}</answer>")
        assert vista_rl.count_placeholders(result.observation.text) == len(result.observation.images)
        if result.info["action_valid"]:
            rendered += 1
            assert 0.5 <= result.reward <= 1.5
        else:
            refused += 1
            assert result.reward == 0.0 and result.info["render_error"]
        if result.done:
            environment.reset(seed=0)
    assert rendered and refused  # the mutations exercise both paths
    environment.close()
