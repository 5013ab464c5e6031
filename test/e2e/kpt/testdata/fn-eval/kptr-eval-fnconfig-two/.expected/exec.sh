kpt fn eval --exec fx --fn-config .expected/cfg.yaml
