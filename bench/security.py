"""`--security sasl_ssl`: the broker on one SASL_SSL listener (SCRAM-SHA-512) and every
benchmark client logged in over TLS, to set a secured figure beside the PLAINTEXT ones.

The clients run in spawned processes: they find their settings in the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLIENT_ENV = "SHOAL_BENCH_CLIENT_SECURITY"
USER, PASSWORD = "bench", "bench-secret"
MECHANISM = "SCRAM-SHA-512"


def client_settings() -> dict[str, str]:
    """librdkafka's security settings for this run (none on PLAINTEXT)."""
    settings: dict[str, str] = json.loads(os.environ.get(CLIENT_ENV, "{}"))
    return settings


def sasl_ssl(workdir: Path, data_dir: Path) -> dict[str, str]:
    """Certificates and the bench user made; the broker's environment returned, and the
    clients' settings put in ours (inherited by every worker started after this)."""
    try:
        import trustme  # the test extra: certificates without openssl
    except ImportError:
        raise SystemExit("--security sasl_ssl needs trustme (pip install -e '.[test]')") from None
    workdir.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Shoal bench CA")
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca_pem, keystore = workdir / "ca.pem", workdir / "server.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    add = [sys.executable, "-m", "cli", "users", "add", USER, "--password", PASSWORD,
           "--mechanism", MECHANISM, "--data-dir", str(data_dir)]  # fmt: skip
    subprocess.run(add, check=True, capture_output=True, timeout=60)
    os.environ[CLIENT_ENV] = json.dumps(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(ca_pem),
        }
    )
    return {
        # The launcher's --host/--port move this, the only listener.
        "SHOAL_LISTENERS": "SASL_SSL://127.0.0.1:0",
        "SHOAL_SASL_ENABLED_MECHANISMS": MECHANISM,
        "SHOAL_SSL_KEYSTORE_TYPE": "PEM",
        "SHOAL_SSL_KEYSTORE_LOCATION": str(keystore),
        "SHOAL_SSL_TRUSTSTORE_TYPE": "PEM",
        "SHOAL_SSL_TRUSTSTORE_LOCATION": str(ca_pem),
    }
