"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, via Selenium).

The service runs in this process (ControlPlane + create_app under uvicorn on loopback)
over the simulated bench's real transports, with telemetry on the auto policy. The test
places a ring, loads the page with the token in the URL fragment, sees one SVG route per
link, kills a transmitter in the simulated bench, and sees the recovery arrive in the page:
the failed accelerator marked, the spare's routes drawn, the recovery's stages on the
timeline. It takes a screenshot; ``LUMION_UPDATE_SCREENSHOT=1`` writes it to
docs/img/dashboard.png (the one docs/controlplane.md shows), otherwise it stays in tmp_path.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from tests.controlplane.rack import WAIT_S, Rack, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DEBIAN_DRIVER = "/usr/bin/chromedriver"  # chromium-driver's path; never let Selenium Manager download one
CHROMEDRIVER = shutil.which("chromedriver") or (DEBIAN_DRIVER if os.path.exists(DEBIAN_DRIVER) else None)
pytestmark = [pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="no chromium/chromedriver: `make chromium` installs them as root "
    "(apt-get install -y --no-install-recommends chromium chromium-driver)",
), pytest.mark.slow]  # a browser and a served control plane per test (7-13 s each at load 30)

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "img" / "dashboard.png"
TOKEN = "browser-test-token-0123456789abcdef"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1500,1250",
)


def _listening_socket() -> socket.socket:
    """A loopback socket on a port the kernel picked, kept open and handed to uvicorn.

    (Picking a port, closing it and letting uvicorn bind it later races other test workers.)
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class Served:
    """create_app(cp) under uvicorn on a loopback port, in a thread."""

    def __init__(self, cp, **options) -> None:
        import uvicorn

        from controlplane.app import create_app

        sock = _listening_socket()
        self.port = sock.getsockname()[1]
        app = create_app(cp, token=TOKEN, **options)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn to start")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)


@pytest.fixture
def served(rack):
    """The module's rack with its ring just placed (conftest ``rack``: restarted from the record
    of one placement instead of a rack set up and a ring placed per test), served."""
    srv = Served(rack.cp, telemetry_period_s=0.02, on_dark="auto")
    yield rack, srv
    srv.stop()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's tests (each loads its own server's page)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="lumion-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _js(driver, script: str):
    return driver.execute_script(script)


def _count(driver, selector: str) -> int:
    return _js(driver, f"return document.querySelectorAll({selector!r}).length")


def _routes(driver) -> dict[str, str]:
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#routes polyline.route')]"
        ".map(p => [p.dataset.link, p.getAttribute('points')]))"
    )


def _roles(driver) -> dict[str, str]:
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#accelerators-layer text.acc-label')]"
        ".map(t => [t.dataset.accelerator, t.dataset.role]))"
    )


def test_dashboard_shows_routes_and_a_telemetry_recovery(served, browser, tmp_path):
    rack, srv = served
    browser.get(f"{srv.url}/#token={TOKEN}")
    ring = {f"gpu{k}->gpu{(k + 1) % 8}" for k in range(8)}
    routes = wait_for(lambda: (r := _routes(browser)) and set(r) == ring and r, what="the ring's routes")
    assert len(set(routes.values())) == 8  # eight different paths
    colours = browser.execute_script(
        "return [...document.querySelectorAll('#routes polyline.route')].map(p => p.getAttribute('stroke'))"
    )
    assert len(set(colours)) == 8  # each link its own colour
    assert "#token=" not in browser.current_url  # the token leaves the address bar (and history)
    roles = _roles(browser)
    assert roles["spare0"] == roles["spare1"] == "spare"
    assert {roles[f"gpu{k}"] for k in range(8)} == {"worker"}
    assert _count(browser, "#chip .tbu") == 71
    assert _count(browser, "#ports circle.port") == 40
    connection = browser.find_element("css selector", "#connection")
    wait_for(lambda: connection.get_attribute("data-state") == "live", what="the page connected")
    wait_for(
        lambda: (
            "lit"
            in browser.execute_script(
                "return [...document.querySelectorAll('#links tbody td:last-child')].map(t => t.textContent)"
            )
        ),
        what="live readings in the links table",
    )

    rack.sim.kill_transmitter("gpu2")
    recovery = wait_for(
        lambda: _js(
            browser,
            "const g = document.querySelector('#timeline g.recovery');"
            "return g && [...g.querySelectorAll('rect')].map(r => r.dataset.stage)",
        ),
        what="the recovery on the timeline",
    )
    assert recovery[:3] == ["detect", "reference", "compute"]  # reference: the held links read by light
    assert {"write", "verify", "light"} <= set(recovery)
    (rec,) = rack.events("recovery")
    spare = rec["spare"]
    moved = wait_for(lambda: (r := _routes(browser)) and f"gpu1->{spare}" in r and r, what="the moved routes")
    assert set(moved) == (ring - {"gpu1->gpu2", "gpu2->gpu3"}) | {f"gpu1->{spare}", f"{spare}->gpu3"}
    assert moved[f"gpu1->{spare}"] != routes["gpu1->gpu2"]
    for name in ring - {"gpu1->gpu2", "gpu2->gpu3"}:
        assert moved[name] == routes[name]  # hitless: every other route drawn exactly where it was
    roles = wait_for(lambda: (r := _roles(browser)) and r["gpu2"] == "failed" and r, what="gpu2 failed")
    assert roles[spare] == "spare"
    assert _count(browser, "#accelerators-layer path.acc-mark.failed") >= 1
    kinds = _js(browser, "return [...document.querySelectorAll('#events li')].map(l => l.dataset.kind)")
    assert {"accelerator-dark", "recovery"} <= set(kinds)
    line = _js(browser, "return document.querySelector('#events li[data-kind=recovery]').textContent")
    assert "verified=by light" in line  # what light said, and each new link measured vs planned
    assert f"gpu1->{spare} measured" in line
    assert "dBm vs planned" in line
    wait_for(
        lambda: (
            "dark (LOS)"
            not in browser.execute_script("return document.querySelector('#links tbody').textContent")
        ),
        what="the recovered ring lit again",
    )
    shot = SCREENSHOT if os.environ.get("LUMION_UPDATE_SCREENSHOT") == "1" else tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dashboard_without_a_valid_token_says_so(served, browser):
    _, srv = served
    browser.get(f"{srv.url}/#token=not-the-token")
    conn = wait_for(
        lambda: (
            (c := browser.find_element("css selector", "#connection")).get_attribute("data-state") == "error"
            and c.text
        ),
        what="the refusal shown",
    )
    assert "token was refused" in conn
    assert browser.execute_script("return document.querySelectorAll('#routes polyline').length") == 0


def _through(rack, tbu: str) -> set[str]:
    links = rack.cp.status()["links"]
    return {lk["link"] for lk in links if any(h["tbu"] == tbu for h in lk["route"]["tbus"])}


def test_a_failed_tbu_is_marked_and_its_link_moved(served, browser):
    rack, srv = served
    browser.get(f"{srv.url}/#token={TOKEN}")
    routes = wait_for(lambda: (r := _routes(browser)) and len(r) == 8 and r, what="the ring's routes")
    link = next(lk for lk in rack.cp.status()["links"] if lk["link"] == "gpu3->gpu4")
    tbu = link["route"]["tbus"][len(link["route"]["tbus"]) // 2]["tbu"]
    sharing = _through(rack, tbu)
    assert "gpu3->gpu4" in sharing
    rack.cp.report_failure(None, tbu=tbu, state="dead")
    wait_for(lambda: _js(browser, f"return document.querySelector('#chip .tbu[data-tbu=\"{tbu}\"]')"
                                  ".classList.contains('failed')"), what=f"{tbu} marked failed")
    assert _count(browser, "#chip .tbu.failed") == 1
    moved = wait_for(lambda: (r := _routes(browser)) and r["gpu3->gpu4"] != routes["gpu3->gpu4"] and r,
                     what="gpu3->gpu4 re-routed around the dead TBU")
    assert set(moved) == set(routes)  # same links, one of them on another path
    assert _through(rack, tbu) == set()  # nothing routes through the dead TBU any more
    for name in set(routes) - sharing:
        assert moved[name] == routes[name]  # links that did not use it are drawn where they were
    assert _roles(browser)["gpu3"] == "worker"


HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'


def test_names_are_shown_as_text_never_run_as_html(tmp_path, browser):
    """An accelerator name (from a fabric file: anybody's text) with markup in it stays a name."""
    from photonics.fabric import Accelerator, default_fabric, make_fabric

    base = default_fabric()
    accs = [
        Accelerator(HOSTILE if a.name == "gpu3" else a.name, a.tx, a.rx, a.spare) for a in base.accelerators
    ]
    fabric = make_fabric(base.mesh, accs, next(iter(base.lanes.values())), base.mesh_spec, "hostile")
    rack = Rack(tmp_path / "cp.db", fabric=fabric)
    rack.cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", HOSTILE], pattern="ring")
    srv = Served(rack.cp)
    try:
        browser.get(f"{srv.url}/#token={TOKEN}")
        wait_for(lambda: _count(browser, "#links tbody tr") == 4, what="the job's links listed")
        wait_for(lambda: _count(browser, "#accelerators tbody tr") == len(accs), what="accelerators listed")
        assert _count(browser, "img") == 0
        assert _js(browser, "return document.body.dataset.pwned") is None
        names = _js(browser, "return [...document.querySelectorAll('#accelerators tbody tr td:first-child')]"
                             ".map(td => td.textContent)")
        assert HOSTILE in names
        links = _js(browser, "return [...document.querySelectorAll('#links tbody tr td:first-child')]"
                             ".map(td => td.textContent)")
        assert f"gpu2->{HOSTILE}" in links
    finally:
        srv.stop()
        rack.close()
