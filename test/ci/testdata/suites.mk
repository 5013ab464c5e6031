# Stand-in suites for TestMakeTestRunsEverySuite: included after the
# project's Makefile, they take the place of the real ones through TEST_SUITES.
.PHONY: suite-passes suite-fails suite-after
suite-passes:
	@echo "ran suite-passes"
suite-fails:
	@echo "ran suite-fails"; exit 1
suite-after:
	@echo "ran suite-after"
