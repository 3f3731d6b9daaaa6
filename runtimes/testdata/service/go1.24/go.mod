module example.com/web

go 1.24
