"""`webgym monitor`: the read-only web app that follows the topics (app.py is the story)."""
