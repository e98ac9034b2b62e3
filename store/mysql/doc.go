// Package mysql is ax's store on MySQL 8 or MariaDB 10.6+ (go-sql-driver/mysql).
package mysql
