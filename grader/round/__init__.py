"""Competition rounds (`grader round`): many entries, one suite, one secret, the references
computed once and reused, a leaderboard anyone can check (docs/rounds.md)."""
