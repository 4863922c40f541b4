"""The publisher: the public stream KQ_PUB, written from the verified log (:mod:`.service`, :mod:`.core`)."""
