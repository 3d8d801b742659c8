from recipe_ledger.cli import main

main()
