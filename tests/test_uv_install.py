"""tools/uv_install.py: set-up installs with uv configured as pip is, or leaves the work to pip (issue 31).

uv does not read pip's configuration; a machine's mirror, wheel folder, constraints or certificate would be
silently ignored. These tests give the script fake ``pip config list`` answers (a stand-in interpreter) and a
fake uv that records its command line and environment: nothing is installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import uv_install  # noqa: E402


def test_sections_override_in_pips_order_and_values_are_split() -> None:
    lines = ["global.extra-index-url='file:///a/simple file:///b/simple'", "global.find-links='/opt/w'",
             ":env:.find-links='/opt/override'", "install.constraint='/etc/c.txt'", "global.cert='/etc/ca.pem'",
             ":env:.disable-pip-version-check='1'", "global.default-timeout='180'"]
    options, env = uv_install.translate(uv_install.parse_config(lines))
    assert options == ["--index-strategy", "unsafe-best-match",
                       "--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple",
                       "--find-links", "/opt/override", "--constraint", "/etc/c.txt"]
    assert env == {"SSL_CERT_FILE": "/etc/ca.pem", "UV_HTTP_TIMEOUT": "180"}


def test_a_setting_without_a_translation_is_named() -> None:
    with pytest.raises(KeyError, match="proxy"):
        uv_install.translate(uv_install.parse_config(["global.proxy='http://p:3128'"]))
    with pytest.raises(ValueError, match="unexpected"):
        uv_install.parse_config(["no equals sign here"])


def _fakes(tmp_path: Path, config: str) -> tuple[Path, Path, Path]:
    """A stand-in interpreter answering `-m pip config list` with ``config``, and a uv that records its call."""
    record = tmp_path / "uv-call.json"
    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\nimport sys\nprint({config!r}, end='')\n")
    uv = tmp_path / "uv"
    uv.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                  f"json.dump({{'argv': sys.argv[1:], 'cert': os.environ.get('SSL_CERT_FILE')}}, "
                  f"open({str(record)!r}, 'w'))\n")
    python.chmod(0o755)
    uv.chmod(0o755)
    return python, uv, record


def test_uv_gets_pips_settings(tmp_path: Path) -> None:
    python, uv, record = _fakes(tmp_path, "global.find-links='/opt/wheels'\nglobal.cert='/etc/ca.pem'\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "uv_install.py"), str(uv), str(python),
                           "-c", "constraints.txt", "-e", ".[cpu]"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    call = json.loads(record.read_text())
    assert call["argv"] == ["pip", "install", "--python", str(python), "--index-strategy", "unsafe-best-match",
                            "--find-links", "/opt/wheels", "-c", "constraints.txt", "-e", ".[cpu]"]
    assert call["cert"] == "/etc/ca.pem"


def test_an_untranslatable_setting_leaves_the_install_to_pip(tmp_path: Path) -> None:
    python, uv, record = _fakes(tmp_path, "global.proxy='http://p:3128'\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "uv_install.py"), str(uv), str(python), "x"],
                          capture_output=True, text=True)
    assert proc.returncode == uv_install.UNTRANSLATABLE
    assert "'proxy' has no uv equivalent" in proc.stderr and "installing with pip" in proc.stderr
    assert not record.exists()  # uv never ran


def test_setup_falls_back_to_pip_on_status_3_and_the_learner_edition_ships_the_script() -> None:
    setup = (ROOT / "tools" / "setup.sh").read_text()
    assert 'tools/uv_install.py"' in setup and '[ "$rc" = 3 ]' in setup and "COURSE_NO_UV" in setup
    assert '"tools/uv_install.py"' in (ROOT / "tools" / "student.py").read_text()


def test_uv_installs_tf_keras_without_its_dependencies_as_asked(tmp_path: Path) -> None:
    """Set-up's second uv call on a CPU machine (tf-keras, whose `tensorflow` requirement tensorflow-cpu meets)
    reaches uv with --no-deps and the constraints, as pip's fallback gets them."""
    python, uv, record = _fakes(tmp_path, "")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "uv_install.py"), str(uv), str(python),
                           "-c", "constraints.txt", "--no-deps", "tf-keras==2.18.0"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(record.read_text())["argv"][-4:] == ["-c", "constraints.txt", "--no-deps", "tf-keras==2.18.0"]
