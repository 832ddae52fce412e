"""The knowledge base: the site's pages, scraped (``scrape/``) into SQLite (``schema``,
``store``) and searched (``query``, ``store``) for the passages an answer stands on."""
