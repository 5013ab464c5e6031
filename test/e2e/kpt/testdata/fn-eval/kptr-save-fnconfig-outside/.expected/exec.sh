kpt fn eval ./sub-pkg -s -t mutator --exec fx --fn-config ./fn-config.yaml
