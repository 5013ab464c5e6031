kpt fn eval -s --exec fx -- op=count
