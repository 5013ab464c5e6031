kpt fn eval --exec fx -- op=count
