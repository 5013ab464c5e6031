kpt live apply
