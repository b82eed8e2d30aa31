from stm_memory.cli.commands import main

main()
