kpt fn eval -s -t transformer --exec fx -- op=count
