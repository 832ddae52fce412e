"""The two ways a rescrape ends without switching the knowledge base."""


class RescrapeStopped(Exception):
    """The user stopped the rescrape; the previous knowledge base is untouched."""


class RescrapeFailed(Exception):
    """Nothing usable came back (no source, no articles, a sitemap that failed).

    Raised instead of replacing a good knowledge base with an empty or partial one.
    """
