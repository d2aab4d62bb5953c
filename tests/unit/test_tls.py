"""A client certificate's principal, as Kafka's default principal builder writes it:
`User:` and the subject in RFC 2253 form (most specific attribute first, specials escaped)."""

from __future__ import annotations

from broker.tls import peer_principal
from broker.tls import subject_name


def test_subject_in_rfc_2253_order() -> None:
    cert = {
        "subject": (
            (("countryName", "GB"),),
            (("organizationName", "Example Ltd"),),
            (("organizationalUnitName", "payments"),),
            (("commonName", "alice"),),
        )
    }
    assert subject_name(cert) == "CN=alice,OU=payments,O=Example Ltd,C=GB"


def test_special_characters_are_escaped_and_multi_valued_rdns_joined() -> None:
    cert = {
        "subject": (
            (("organizationName", "Smith, Jones & Co"),),
            (("commonName", "bob"), ("userId", "b+1")),
        )
    }
    assert subject_name(cert) == "CN=bob+UID=b\\+1,O=Smith\\, Jones & Co"


def test_no_certificate_is_no_principal() -> None:
    assert peer_principal(None) is None
