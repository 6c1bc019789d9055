from grader.cli.main import main

main()
