"""The evaluator: verifiable reward for every completed episode, exactly once."""
