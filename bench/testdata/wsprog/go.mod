module lazaret.invalid/wsprog

go 1.22
