module testsum.example

go 1.26
