kpt fn eval --exec fx --fn-config nope.yaml
