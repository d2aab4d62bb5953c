"""Which listener the container's argument-less health check knocks on."""

from __future__ import annotations

from broker.healthcheck import target


def test_the_first_plain_listener_on_loopback_when_it_listens_everywhere() -> None:
    env = {
        "SHOAL_LISTENERS": "SSL://0.0.0.0:9093,INTERNAL://0.0.0.0:19092,EXTERNAL://10.0.0.5:9092",
        "SHOAL_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    }
    assert target(env) == ("127.0.0.1", 19092)  # TLS needs a handshake: skipped
    assert target({"SHOAL_LISTENERS": "PLAINTEXT://10.0.0.5:9000"}) == ("10.0.0.5", 9000)


def test_kafkas_default_port_without_settings_or_plain_listeners() -> None:
    assert target({}) == ("127.0.0.1", 9092)
    assert target({"SHOAL_LISTENERS": "SSL://0.0.0.0:9093"}) == ("127.0.0.1", 9092)
