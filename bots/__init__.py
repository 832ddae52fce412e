"""The bots: platform adapters (Discord, Slack, terminal) over one shared streaming core."""
