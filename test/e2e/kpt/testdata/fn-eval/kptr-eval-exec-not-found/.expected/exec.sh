kpt fn eval --exec kptr-no-such-function
