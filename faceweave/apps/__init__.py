"""Front ends (command line now; HTTP API and web later), all thin over the same engine."""
