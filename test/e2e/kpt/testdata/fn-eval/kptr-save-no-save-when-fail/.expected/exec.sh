kpt fn eval -s -t mutator --exec fx -- op=crash code=1 message=boom
