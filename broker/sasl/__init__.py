"""SASL authentication of one connection: the mechanisms' server sides and the session that
runs them (SaslHandshake picks a mechanism, SaslAuthenticate carries its tokens)."""
